"""Bad input never stops a run: 1000 valid lines mixed with 200 invalid ones of every kind (invalid JSON,
invalid UTF-8, wrong types, out-of-range sampling values, an unknown OpenAI url, duplicate ids, a
prompt longer than the context, token ids outside the vocabulary, a 10 MB line, a torn last line),
behind a BOM, with CRLF and blank lines, give exactly the results the 1000 valid lines give alone,
one error line per invalid line with its line number and a message naming the problem, exit status 2;
and so does --resume from half of that output."""
import json
import os
import random
import shutil

from common import Checks, read_jsonl, run, tiny_spm_gguf, tmpdir

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
WORDS = "I dreamed of a quiet city where the robots sang softly under glass rivers and memory light".split()
NUM_VALID, NUM_INVALID = 1000, 200


def valid_row(rng, i):
    """Simple-form lines (a few OpenAI-form, prompt_token_ids and empty prompts), greedy."""
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
    if i % 50 == 7:
        return {"custom_id": f"v{i}", "method": "POST", "url": "/v1/completions",
                "body": {"model": "m", "prompt": prompt, "max_tokens": rng.randint(1, 6), "temperature": 0}}
    row = {"id": f"v{i}", "max_tokens": rng.randint(1, 6), "temperature": 0}
    if i % 10 == 3:
        row["prompt_token_ids"] = [1] + [rng.randrange(3, 512) for _ in range(rng.randint(1, 20))]
    else:
        row["prompt"] = "" if i % 100 == 5 else prompt  # an empty prompt is valid: BOS alone
    return row


def dumps(row):
    return json.dumps(row).encode()


def openai(url="/v1/completions", method="POST", body=None):
    return {"custom_id": "oa", "method": method, "url": url, "body": body if body is not None else {"prompt": "x"}}


# (kind, line bytes for an invalid line given the valid ids so far and a unique number, text its error
# message must contain). Invalid lines that parse claim their ids too, so each gets its own.
KINDS = [
    ("json", lambda ids, u: b'{"id": "j", "prompt": "x",,}', "invalid JSON"),
    ("not object", lambda ids, u: b'[1, 2, 3]', "must be a JSON object"),
    ("utf-8", lambda ids, u: b'{"id": "u", "prompt": "\xff\xfe dream"}', "invalid UTF-8"),
    ("no prompt", lambda ids, u: dumps({"id": f"np{u}", "max_tokens": 3}), "no prompt"),
    ("prompt type", lambda ids, u: dumps({"id": f"pt{u}", "prompt": 42}), "field 'prompt' must be a string"),
    ("max_tokens < 0", lambda ids, u: dumps({"id": f"mn{u}", "prompt": "x", "max_tokens": -3}), "'max_tokens'"),
    ("max_tokens huge", lambda ids, u: dumps({"id": f"mh{u}", "prompt": "x", "max_tokens": 10**12}), "'max_tokens'"),
    ("max_tokens type", lambda ids, u: dumps({"id": f"ms{u}", "prompt": "x", "max_tokens": "5"}), "'max_tokens'"),
    ("temperature < 0", lambda ids, u: dumps({"id": f"t{u}", "prompt": "x", "temperature": -0.5}), "'temperature'"),
    ("top_p 0", lambda ids, u: dumps({"id": f"p0{u}", "prompt": "x", "top_p": 0}), "'top_p'"),
    ("top_p > 1", lambda ids, u: dumps({"id": f"p1{u}", "prompt": "x", "top_p": 1.5}), "'top_p'"),
    ("url", lambda ids, u: dumps(openai(url="/v1/moderations")), "'url'"),
    ("method", lambda ids, u: dumps(openai(method="GET")), "'method'"),
    ("body type", lambda ids, u: dumps(openai(body="x")), "'body'"),
    ("duplicate id", lambda ids, u: dumps({"id": ids[-1], "prompt": "again", "max_tokens": 2}), "duplicate id"),
    ("too long", lambda ids, u: dumps({"id": f"tl{u}", "prompt": " ".join(WORDS * 20)}), "context of 128 tokens"),
    ("vocab", lambda ids, u: dumps({"id": f"vo{u}", "prompt_token_ids": [1, 600]}), "outside the vocabulary"),
    ("empty ids", lambda ids, u: dumps({"id": f"ei{u}", "prompt_token_ids": []}), "'prompt_token_ids'"),
    ("id type", lambda ids, u: dumps({"id": [1], "prompt": "x"}), "field 'id'"),
    ("stop type", lambda ids, u: dumps({"id": f"st{u}", "prompt": "x", "stop": 5}), "'stop'"),
    ("seed < 0", lambda ids, u: dumps({"id": f"sd{u}", "prompt": "x", "seed": -1}), "'seed'"),
    ("ignore_eos", lambda ids, u: dumps({"id": f"ie{u}", "prompt": "x", "ignore_eos": "yes"}), "'ignore_eos'"),
]
BIG = ("10 MB line", lambda ids, u: dumps({"id": "big", "prompt": "dream " * (10 * 1024 * 1024 // 6)}), "bytes")
TORN = ("torn last line", lambda ids, u: b'{"id": "torn", "prompt": "I dre', "is the file truncated?")


def build_files(rng):
    """The clean file, the mixed file, and the expected error kind of each mixed-file line number."""
    rows = [valid_row(rng, i) for i in range(NUM_VALID)]
    clean = b"".join(dumps(r) + b"\n" for r in rows)
    invalid_at = set(rng.sample(range(1, NUM_VALID + NUM_INVALID - 1), NUM_INVALID - 1))
    kinds = [KINDS[i % len(KINDS)] for i in range(NUM_INVALID - 2)] + [BIG]
    rng.shuffle(kinds)
    lines, expected, ids, valid = [], {}, [], iter(rows)
    for slot in range(NUM_VALID + NUM_INVALID - 1):
        if rng.random() < 0.02:
            lines.append(b"  ")  # blank lines are skipped but counted
        if slot in invalid_at:
            kind = kinds.pop()
            lines.append(kind[1](ids, len(lines)))
            expected[len(lines)] = kind
        else:
            row = next(valid)
            ids.append(row.get("id", row.get("custom_id")))
            lines.append(dumps(row))
    expected[len(lines) + 1] = TORN
    ends = [b"\r\n" if rng.random() < 0.2 else b"\n" for _ in lines]
    mixed = b"\xef\xbb\xbf" + b"".join(line + end for line, end in zip(lines, ends)) + TORN[1](ids, 0)
    return clean, mixed, expected


def outputs(rows):
    """id (or custom_id) -> (text, output_token_ids) of the result lines."""
    out = {}
    for row in rows:
        if "custom_id" in row:
            out[row["custom_id"]] = (row["response"]["body"]["choices"][0]["text"], None)
        else:
            out[row["id"]] = (row["text"], row["output_token_ids"])
    return out


c = Checks()
work = tmpdir()
clean, mixed, expected = build_files(random.Random(2024))
clean_path, mixed_path = os.path.join(work, "clean.jsonl"), os.path.join(work, "mixed.jsonl")
open(clean_path, "wb").write(clean)
open(mixed_path, "wb").write(mixed)
clean_out, mixed_out = os.path.join(work, "clean-out.jsonl"), os.path.join(work, "mixed-out.jsonl")
summary = os.path.join(work, "summary.json")

run(["run", clean_path, "-o", clean_out] + MODEL)
proc = run(["run", mixed_path, "-o", mixed_out, "--ordered", "--summary", summary] + MODEL, check=False)
c.check(proc.returncode == 2, f"mixed run exited {proc.returncode}, expected 2: {proc.stderr[-500:]}")

reference = outputs(read_jsonl(clean_out))
rows = read_jsonl(mixed_out)
results = [r for r in rows if r.get("error") is None]
errors = [r for r in rows if r.get("error") is not None]
c.check(len(reference) == NUM_VALID, f"clean run: {len(reference)} results")
c.check(len(results) == NUM_VALID, f"mixed run: {len(results)} results, expected {NUM_VALID}")
c.check(len(errors) == NUM_INVALID, f"mixed run: {len(errors)} error lines, expected {NUM_INVALID}")
got = outputs(results)
c.check(got == reference, f"{sum(got.get(k) != v for k, v in reference.items())} results differ from the clean run")


def error_line(row):
    if "custom_id" in row:  # OpenAI shape: the line is in the batch id "cbatch-<line>"
        return int(row["id"].split("-")[1]), row["error"]["message"]
    return row["line"], row["error"]["message"]


lines_seen = {}
for row in errors:
    line, message = error_line(row)
    lines_seen[line] = message
    kind = expected.get(line)
    c.check(kind is not None, f"error line for line {line}, which is valid: {message[:200]}")
    if kind:
        c.check(message.startswith(f"line {line}: ") and kind[2] in message,
                f"{kind[0]} at line {line}: message {message[:200]!r} lacks {kind[2]!r}")
c.check(set(lines_seen) == set(expected), f"lines without an error line: {sorted(set(expected) - set(lines_seen))}")
c.check([error_line(r)[0] for r in errors] == sorted(expected), "--ordered: error lines out of input order")
s = json.load(open(summary))
c.check(s["requests_ok"] == NUM_VALID and s["requests_failed"] == NUM_INVALID,
        f"summary {s['requests_ok']} ok, {s['requests_failed']} failed")
# Resume after a kill that left half the output and a torn line: the same 1000 results and 200 error
# lines, none twice (error lines are matched by line number, duplicates found again), exit status 2.
with open(mixed_out, "rb") as f:
    kept = f.read().split(b"\n")
with open(mixed_out, "wb") as f:
    f.write(b"\n".join(kept[:len(kept) // 2]) + b"\n" + kept[len(kept) // 2][:30])
proc = run(["run", mixed_path, "-o", mixed_out, "--resume", "--summary", summary] + MODEL, check=False)
c.check(proc.returncode == 2, f"resumed mixed run exited {proc.returncode}, expected 2")
rows = read_jsonl(mixed_out)
errors = [error_line(r)[0] for r in rows if r.get("error") is not None]
c.check(outputs(r for r in rows if r.get("error") is None) == reference, "resumed: results differ from the clean run")
c.check(sorted(errors) == sorted(expected), f"resumed: {len(errors)} error lines, {len(set(errors))} distinct")
s = json.load(open(summary))
c.check(s["resumed_ok"] + s["requests_ok"] == NUM_VALID and s["resumed_failed"] + s["requests_failed"] == NUM_INVALID,
        f"resumed summary {s}")
shutil.rmtree(work, ignore_errors=True)
c.done()
