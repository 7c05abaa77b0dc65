"""Bounded messages: an error message quotes at most about 200 characters of any input (docs/design.md). The
biggest inputs (100,000 choices, a 100,000-value enum, a 1 MB invalid regex, JSON schema, grammar,
messages role, a 1 MB prompt with a bad field, a 1 MB stop list of the wrong type, bad UTF-8 after 1 MB, a
1 MB id or custom_id) keep every output, stdout and stderr line under 4 KB; each input that must fail
gets an error line naming the field; and a fatal error (a 100 KB --chat-template, --model, --threads
value or prompts path: the kernel refuses arguments over 128 KiB) keeps stderr under 4 KB."""
import json
import os
import re

from common import Checks, run, tiny_dummy_model, tmpdir

MB = 1 << 20
ARG_BYTES = 100_000  # under the kernel's 128 KiB bound on one command-line argument
MAX_LINE_BYTES = 4096
BIG = "a" * MB

# (id, request fields, text the error message must contain, or None when the line may also succeed:
# choice lists may compile).
CHOICES = [f"choice-{i}" for i in range(100_000)]
CASES = [
    ("choices", {"structured_outputs": {"choice": CHOICES}}, None),
    ("enum", {"response_format": {"type": "json_schema", "json_schema": {"schema": {"enum": CHOICES}}}}, None),
    ("regex", {"structured_outputs": {"regex": BIG + "("}}, "'structured_outputs.regex'"),
    ("regex-big", {"structured_outputs": {"regex": "|".join(CHOICES)}}, None),
    ("schema-keyword", {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", BIG: 1}}}},
     "'response_format.json_schema.schema'"),
    ("schema-type", {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": BIG}}}},
     "'response_format.json_schema.schema'"),
    ("schema-text", {"structured_outputs": {"json": "{\"type\": \"" + BIG}}, "'structured_outputs.json'"),
    ("schema-ref", {"guided_json": {"$ref": "#/$defs/" + BIG}}, "'guided_json'"),
    ("grammar", {"structured_outputs": {"grammar": 'root ::= "' + BIG + '" )'}}, "'structured_outputs.grammar'"),
    ("grammar-rule", {"structured_outputs": {"grammar": "root ::= " + BIG}}, "'structured_outputs.grammar'"),
    ("prompt-field", {"prompt": BIG, "max_tokens": "5"}, "'max_tokens'"),
    ("bad-value", {"top_p": BIG}, "'top_p'"),
    ("stop", {"stop": [BIG, 5]}, "'stop'"),
    ("long-prompt", {"prompt": BIG}, "context"),
    ("messages-type", {"prompt": None, "messages": [{"role": "user", "content": [{"type": "image", "text": BIG}]}]},
     "'messages[0].content[0]'"),
]


def request(rid, fields):
    row = {"id": rid, "prompt": "x", "max_tokens": 2, "temperature": 0}
    row.update(fields)
    return {k: v for k, v in row.items() if v is not None}


def raw_lines():
    """Lines written as they are: (text, text its error message must contain)."""
    return [
        (json.dumps(request("i" * MB, {"max_tokens": -1})), "'max_tokens'"),
        (json.dumps({"custom_id": "c" * MB, "method": "POST", "url": "/v1/" + BIG, "body": {"prompt": "x"}}),
         "'url'"),
        ('{"id": "utf8", "prompt": "' + BIG + '\udcff"}', "UTF-8"),
        ('{"id": "json", "prompt": "' + BIG + '",,}', "invalid JSON"),
        (json.dumps(BIG), "JSON object"),
    ]


def write_prompts(path):
    """The prompts file and what each line expects: (id or None, message text or None)."""
    expected = []
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
        for rid, fields, text in CASES:
            f.write(json.dumps(request(rid, fields)) + "\n")
            expected.append(text)
        for line, text in raw_lines():
            f.write(line + "\n")
            expected.append(text)
    return expected


def check_lines(c, what, text):
    for i, line in enumerate(text.splitlines()):
        size = len(line.encode("utf-8", "surrogateescape"))
        c.check(size < MAX_LINE_BYTES, f"{what} line {i + 1} has {size} bytes: {line[:300]}")


def message_of(row):
    error = row.get("error")
    return error.get("message", "") if isinstance(error, dict) else ""


def check_run(c, work):
    prompts, out = os.path.join(work, "prompts.jsonl"), os.path.join(work, "out.jsonl")
    expected = write_prompts(prompts)
    proc = run(["run", prompts, "-o", out] + tiny_dummy_model(work), expect_rc=2)
    check_lines(c, "stdout", proc.stdout)
    check_lines(c, "stderr", proc.stderr)
    with open(out, encoding="utf-8") as f:
        text = f.read()
    check_lines(c, "output", text)
    rows = [json.loads(line) for line in text.splitlines()]
    c.check(len(rows) == len(expected), f"{len(rows)} output lines for {len(expected)} input lines")
    errors = {row["line"]: row for row in rows if "line" in row}
    errors.update({int(row["id"].removeprefix("cbatch-")): row for row in rows if "custom_id" in row})
    results = {row["id"]: row for row in rows if "text" in row}
    for line_no, want in enumerate(expected, start=1):
        row = errors.get(line_no) or results.get(CASES[line_no - 1][0] if line_no <= len(CASES) else None, {})
        if want is None:
            c.check("text" in row or message_of(row), f"line {line_no}: neither a result nor an error: {row}")
            continue
        message = message_of(row)
        c.check(want in message, f"line {line_no}: error message lacks {want!r}: {message[:500]!r}")
        quotes_big_text = re.search(r"(.)\1{59}", message) is not None
        c.check(not quotes_big_text or "bytes)" in message,
                f"line {line_no}: the message does not say how long the elided text was: {message[:500]!r}")


def check_role(c, work):
    """A 1 MB role that Mistral's template refuses: an error line that quotes a bounded part of it."""
    prompts, out = os.path.join(work, "role.jsonl"), os.path.join(work, "role-out.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps({"id": "role", "messages": [{"role": "r" * MB, "content": "hi"}], "max_tokens": 2}) + "\n")
    proc = run(["run", prompts, "-o", out, "--chat-template", "mistral"] + tiny_dummy_model(work), expect_rc=2)
    check_lines(c, "stderr", proc.stderr)
    with open(out) as f:
        text = f.read()
    check_lines(c, "role output", text)
    message = message_of(json.loads(text))
    c.check("role 'rrr" in message and f"({MB} bytes)" in message, f"role error: {message[:500]!r}")


def check_fatal(c, work):
    prompts = os.path.join(work, "one.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps({"id": "one", "prompt": "x", "max_tokens": 1}) + "\n")
    model = tiny_dummy_model(work)
    long = "z" * ARG_BYTES
    for what, args in [("--chat-template", ["run", prompts, "--chat-template", long] + model),
                       ("--model", ["run", prompts, "--device", "cpu", "--model", "/" + long]),
                       ("--threads", ["run", prompts] + model + ["--threads", long]),
                       ("prompts file", ["run", "/" + long] + model)]:
        proc = run(args, check=False)
        c.check(proc.returncode == 1, f"{what}: exit status {proc.returncode}, expected 1")
        check_lines(c, f"{what} stderr", proc.stderr)
        check_lines(c, f"{what} stdout", proc.stdout)
        c.check("zzz" in proc.stderr, f"{what}: stderr does not quote the value: {proc.stderr[:300]!r}")


def main():
    c = Checks()
    work = tmpdir()
    check_run(c, work)
    check_role(c, work)
    check_fatal(c, work)
    c.done()


if __name__ == "__main__":
    main()
