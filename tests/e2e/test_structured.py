"""Structured outputs on SmolLM2 (CPU): every completion that finishes with `stop` full-matches its regex
under Python's `re`, validates against its JSON schema under the `jsonschema` package (independent
matchers; 42 schemas: nested objects, arrays, enums, anyOf/oneOf, recursive $refs, formats, patterns,
numeric bounds), parses as a JSON object for json_object, and every choice output is one of its choices, greedy
and at temperature 1.0, with n > 1 and in the OpenAI form; greedy constrained outputs are identical across
modes and budgets; bad constraints are error lines, the rest runs (exit 2)."""
import json
import os
import re

from common import Checks, need_smollm2, read_jsonl, run, tmpdir, write_jsonl

REGEXES = [
    r" ?\(\d{3}\) \d{3}-\d{4}", r" \d{4}-(0[1-9]|1[0-2])-[0-3]\d", r" [A-Z][a-z]+( [A-Z][a-z]+)?",
    r" (red|green|blue)", r" \d+(\.\d{1,2})?", r"[a-z]{3,8}", r" -?\d{1,3}", r" [a-z]+@[a-z]+\.(com|org)",
    r" (true|false)", r" [A-Z]{2,3}\d{2}", r" \w+( \w+){0,4}\.", r" [^\n]{5,20}\n", r"( [a-z]+,){2} [a-z]+",
    r" \[\d+(, \d+){1,3}\]", r" #[0-9a-f]{6}", r" v\d+\.\d+\.\d+", r" (yes|no)!?", r" [\w.]+\.py",
    r" \d\d:\d\d", r" (?:ab|cd)+e?",
]
CHOICES = [[" positive", " negative", " neutral"], ["yes", "no"], [" Paris", " London", " Berlin", " Rome"],
           [" A", " B", " C", " D"]]
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"},
                                      "population": {"type": "number"}}, "required": ["city"], "additionalProperties": False},
    {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "note": {"type": ["string", "null"]}}, "required": ["ok", "note"]},
    {"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"}},
     "required": ["date", "id"]},
    {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"]},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}}, "required": ["code"]},
    {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}]},
    {"type": "object", "properties": {"label": {"const": "spam"}, "score": {"type": "number"}}, "required": ["label", "score"]},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                        "required": ["v"]}}, "$ref": "#/$defs/node"},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"type": "object", "properties": {"b": {"type": "string", "minLength": 1, "maxLength": 5}}, "required": ["b"]}]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 4},
                                      "meta": {"type": "object", "properties": {"n": {"type": "integer"}}}}, "required": ["tags"]},
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "string", "enum": ["low", "medium", "high"]},
    # recursion (a rule of its own, not unrolled), numeric bounds, formats, patterns, values of any depth
    {"$defs": {"list": {"type": "object", "properties": {"value": {"type": "integer"},
                                                         "next": {"anyOf": [{"$ref": "#/$defs/list"}, {"type": "null"}]}},
                        "required": ["value", "next"]}}, "$ref": "#/$defs/list"},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                      "children": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3}}, "required": ["name"]},
    {"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}},
               "b": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "integer"}]}, "maxItems": 2}},
     "$ref": "#/$defs/a"},
    {"$defs": {"expr": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 99},
                                  {"type": "object", "properties": {"op": {"enum": ["+", "*"]},
                                                                    "args": {"type": "array", "items": {"$ref": "#/$defs/expr"},
                                                                             "minItems": 2, "maxItems": 2}},
                                   "required": ["op", "args"]}]}}, "$ref": "#/$defs/expr"},
    {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["age"]},
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
    {"type": "integer", "minimum": -50, "maximum": -5},
    {"type": "object", "properties": {"price": {"type": "number", "minimum": 0}}, "required": ["price"]},
    {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 6}, "minItems": 2, "maxItems": 5},
    {"type": "integer", "exclusiveMinimum": 1000, "maximum": 1999},
    {"type": "number", "minimum": -1, "maximum": 1},
    {"type": "object", "properties": {"t": {"type": "string", "format": "time"}}, "required": ["t"]},
    {"type": "string", "format": "date-time"},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {
        "c": {"type": "string"}}, "required": ["c"]}}, "required": ["b"]}}, "required": ["a"]},
    {"oneOf": [{"type": "string", "enum": ["x", "y"]}, {"type": "boolean"}]},
    {"enum": [1, "two", None, True]},
    {"const": {"k": 1}},
    {"type": ["integer", "string"]},
    {"type": "string", "pattern": "^[a-z]+-[0-9]{2,4}$"},
    {"type": "string", "minLength": 3, "maxLength": 6},
    {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}, "tag": {"enum": ["a", "b"]}},
                                "required": ["id", "tag"], "additionalProperties": False}, "maxItems": 3},
    {},
    {"type": "object"},
    {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "boolean"}}},
    {"type": "array", "prefixItems": [{"type": "integer", "minimum": 1900, "maximum": 2100}, {"type": "string", "format": "date"}],
     "items": False},
    {"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}},
     "type": "object", "properties": {"from": {"$ref": "#/$defs/pt"}, "to": {"$ref": "#/$defs/pt"}}, "required": ["from", "to"]},
    {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string", "format": "uuid"}, "maxItems": 2},
                                      "contact": {"type": "string", "format": "email"}}, "required": ["ids"]},
]
try:
    import jsonschema
except ImportError:
    jsonschema = None
    print("jsonschema is not installed (make setup installs it): the JSON schema outputs are not validated")
PROMPTS = ["My phone number is", "Today's date is", "The name of the city is", "Answer:", "Output:"]

if os.environ.get("CBATCH_SANITIZED") == "1":  # the sanitizer build checks a few of each kind (10x slower)
    REGEXES, SCHEMAS, CHOICES = REGEXES[:4], SCHEMAS[:4] + SCHEMAS[15:17], CHOICES[:1]
model = need_smollm2()
c = Checks()
work = tmpdir()
rows = []
for i, pattern in enumerate(REGEXES):
    for temp in (0, 1.0):
        rows.append({"id": f"re{i}-{temp}", "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": 40,
                     "temperature": temp, "seed": i, "structured_outputs": {"regex": pattern}})
for i, choices in enumerate(CHOICES):
    rows.append({"id": f"ch{i}", "messages": [{"role": "user", "content": "Pick one."}], "max_tokens": 10,
                 "temperature": 1.0, "seed": i, "n": 3, "guided_choice": choices})
for i, schema in enumerate(SCHEMAS):
    for temp in (0, 1.0):
        rows.append({"id": f"js{i}-{temp}", "prompt": "The answer as JSON:", "max_tokens": 60, "temperature": temp,
                     "seed": i, "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}})
rows.append({"id": "obj", "prompt": "Some JSON:", "max_tokens": 60, "temperature": 1.0, "seed": 1,
             "response_format": {"type": "json_object"}})
rows.append({"custom_id": "oa", "method": "POST", "url": "/v1/completions",
             "body": {"model": "m", "prompt": "Color:", "max_tokens": 8, "guided_regex": r" (red|green|blue)"}})
bad = [("bad-open", {"guided_regex": "(a"}), ("bad-empty", {"guided_choice": []}),
       ("bad-look", {"guided_regex": "(?=x)"}), ("bad-format", {"response_format": {"type": "yaml"}}),
       ("bad-two", {"guided_regex": "a", "guided_choice": ["b"]}),
       ("bad-schema", {"guided_json": {"type": "object", "patternProperties": {}}}),
       ("bad-json-text", {"guided_json": "{not json"}), ("bad-type", {"guided_json": {"type": "thing"}}),
       ("bad-bound", {"guided_json": {"type": "number", "minimum": 0.5}}, "'minimum'"),
       ("bad-range", {"guided_json": {"type": "integer", "minimum": 5, "exclusiveMaximum": 5}}, "leave no number"),
       ("bad-dfa", {"guided_regex": "(a|b)*a(a|b){24}"}, "states"),
       ("bad-pattern", {"guided_json": {"type": "string", "pattern": "a)|(b"}}, "unbalanced ')'"),
       ("bad-untyped", {"guided_json": {"minimum": 3}}, "'minimum' is supported with a 'type' only"),
       ("bad-count", {"structured_outputs": {"regex": "a{1000000}"}}, "a repetition count above 1000"),
       ("bad-length", {"guided_json": {"type": "string", "maxLength": 1e30}}, "'maxLength'", "above the limit 1000")]
for name, fields, *_ in bad:
    rows.append(dict({"id": name, "prompt": "x", "max_tokens": 4}, **fields))
prompts, out = os.path.join(work, "p.jsonl"), os.path.join(work, "o.jsonl")
write_jsonl(prompts, rows)
run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"], expect_rc=2)
results = {r.get("custom_id") or r["id"]: r for r in read_jsonl(out)}

stopped = 0
for i, pattern in enumerate(REGEXES):
    for temp in (0, 1.0):
        r = results[f"re{i}-{temp}"]
        if r["finish_reason"] == "stop":
            stopped += 1
            c.check(re.fullmatch(pattern, r["text"]) is not None, f"{pattern!r} (t={temp}): {r['text']!r} does not match")
        else:
            c.check(re.fullmatch(pattern, r["text"]) is None or r["completion_tokens"] == 40,
                    f"{pattern!r}: cut at {r['completion_tokens']} tokens though complete")
c.check(stopped >= len(REGEXES), f"only {stopped} of {2 * len(REGEXES)} regex outputs completed")
for i, choices in enumerate(CHOICES):
    for o in results[f"ch{i}"]["outputs"]:
        c.check(o["finish_reason"] == "stop" and o["text"] in choices, f"choice {choices}: {o['text']!r}")
json_stopped = 0
for i, schema in enumerate(SCHEMAS):
    for temp in (0, 1.0):
        r = results[f"js{i}-{temp}"]
        if r["finish_reason"] != "stop":
            continue
        json_stopped += 1
        try:
            doc = json.loads(r["text"])
        except ValueError:
            c.check(False, f"schema {i} (t={temp}): not JSON: {r['text']!r}")
            continue
        if jsonschema is not None:
            checker = jsonschema.Draft202012Validator.FORMAT_CHECKER  # RFC 3339 times (FormatChecker(): draft 3's HH:MM:SS)
            errors = list(jsonschema.Draft202012Validator(schema, format_checker=checker).iter_errors(doc))
            c.check(not errors, f"schema {i} (t={temp}): {r['text']!r} is invalid: {errors[:1]}")
c.check(json_stopped >= len(SCHEMAS), f"only {json_stopped} of {2 * len(SCHEMAS)} JSON outputs completed")
if results["obj"]["finish_reason"] == "stop":
    c.check(isinstance(json.loads(results["obj"]["text"]), dict), f"json_object: {results['obj']['text']!r}")
body = results["oa"]["response"]["body"]
c.check(body["choices"][0]["text"] in (" red", " green", " blue"), f"OpenAI form: {body['choices'][0]['text']!r}")
for name, _, *words in bad:
    c.check(all(w in results[name].get("error", {}).get("message", "") for w in words), f"{name}: not an error line: {results[name]}")

# Greedy constrained output does not depend on the schedule.
greedy = [r for r in rows if r.get("temperature") == 0]
write_jsonl(prompts, greedy)
reference = None
for extra in ([], ["--mode", "static"], ["--mode", "sequential"], ["--max-num-batched-tokens", "16", "--block-size", "4"])[
        :2 if os.environ.get("CBATCH_SANITIZED") == "1" else 4]:
    run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + extra)
    got = {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}
    if reference is None:
        reference = got
    c.check(got == reference, f"constrained greedy outputs change with {' '.join(extra)}")
c.done()
