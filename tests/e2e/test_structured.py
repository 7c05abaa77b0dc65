"""Structured outputs with regex and choice constraints on SmolLM2 (CPU): every completion that finishes
with `stop` full-matches its regex under Python's `re` (an independent matcher), every choice output is
one of its choices, greedy and at temperature 1.0, with n > 1 and in the OpenAI form; greedy constrained
outputs are identical across modes and budgets; bad constraints are error lines, the rest runs (exit 2)."""
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
PROMPTS = ["My phone number is", "Today's date is", "The name of the city is", "Answer:", "Output:"]

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
rows.append({"custom_id": "oa", "method": "POST", "url": "/v1/completions",
             "body": {"model": "m", "prompt": "Color:", "max_tokens": 8, "guided_regex": r" (red|green|blue)"}})
bad = [("bad-open", {"guided_regex": "(a"}), ("bad-empty", {"guided_choice": []}),
       ("bad-look", {"guided_regex": "(?=x)"}), ("bad-json", {"response_format": {"type": "json_object"}}),
       ("bad-two", {"guided_regex": "a", "guided_choice": ["b"]})]
for name, fields in bad:
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
body = results["oa"]["response"]["body"]
c.check(body["choices"][0]["text"] in (" red", " green", " blue"), f"OpenAI form: {body['choices'][0]['text']!r}")
for name, _ in bad:
    c.check("error" in results[name], f"{name}: not an error line: {results[name]}")

# Greedy constrained output does not depend on the schedule.
greedy = [r for r in rows if r.get("temperature") == 0]
write_jsonl(prompts, greedy)
reference = None
for extra in ([], ["--mode", "static"], ["--mode", "sequential"], ["--max-num-batched-tokens", "16", "--block-size", "4"]):
    run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + extra)
    got = {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}
    if reference is None:
        reference = got
    c.check(got == reference, f"constrained greedy outputs change with {' '.join(extra)}")
c.done()
