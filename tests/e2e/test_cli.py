"""The command line contract: exit statuses, error lines for bad input lines, clear messages for bad
arguments, standard input/output in pipelines, --ordered, --summary, inspect and --version, stop strings
and stop token ids. On tiny-spm: inspect's figures are those of its Hugging Face config.json, and the
greedy texts and ids the stops cut are its float64-reference goldens."""
import json
import os

from common import Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

GGUF = tiny_spm_gguf()
TINY = os.path.dirname(GGUF)
MODEL = ["--model", GGUF, "--device", "cpu"]
GOLDEN = {g["prompt"]: g for g in read_jsonl(os.path.join(TINY, "golden", "greedy.jsonl"))}
c = Checks()
work = tmpdir()

# Version and inspect.
proc = run(["--version"])
c.check("cbatch" in proc.stdout and "CUDA support" in proc.stdout, "--version output")
proc = run(["inspect", "--model", GGUF])
config = json.load(open(os.path.join(TINY, "hf", "config.json")))
for field, key in [("dim", "hidden_size"), ("hidden_dim", "intermediate_size"), ("layers", "num_hidden_layers"),
                   ("heads", "num_attention_heads"), ("kv_heads", "num_key_value_heads"), ("vocab", "vocab_size"),
                   ("context", "max_position_embeddings")]:
    line = f"{field}: {config[key]}"
    c.check(f"\n{line}\n" in proc.stdout, f"inspect: no {line!r} line in {proc.stdout!r}")

# Bad arguments: exit 1 with a message that names the argument.
for args, needle in [
    (["run", "x.jsonl", "--max-num-seqs", "0"] + MODEL, "--max-num-seqs"),
    (["run", "x.jsonl", "--mode", "fast"] + MODEL, "--mode"),
    (["run", os.path.join(work, "missing.jsonl")] + MODEL, "missing.jsonl"),
    (["run", "x.jsonl", "--model", os.path.join(work, "nope.gguf")], "nope.gguf"),
    (["run", "x.jsonl", "--dtype", "bf16", "--device", "cpu", "--model", GGUF], "bf16"),
    (["bench", "--input-len", "9:3"] + MODEL, "--input-len"),
]:
    proc = run(args, check=False)
    c.check(proc.returncode == 1, f"{args}: exit {proc.returncode}, expected 1")
    c.check(needle in proc.stderr, f"{args}: stderr does not name {needle!r}: {proc.stderr.strip()[:300]}")

# Good and bad lines: the run goes on, bad lines get error lines, exit status 2.
lines = [
    json.dumps({"id": "ok1", "prompt": "I dreamed of", "max_tokens": 5, "temperature": 0}),
    "{not json",
    json.dumps({"id": "neg", "prompt": "x", "max_tokens": -3}),
    "",
    json.dumps({"id": "noprompt", "max_tokens": 3}),
    json.dumps({"id": "vocab", "prompt_token_ids": [1, 9999]}),
    json.dumps({"id": "long", "prompt_token_ids": [1] * 200}),
    json.dumps({"id": 42, "prompt": "robots", "max_tokens": 4, "temperature": 0}),
    json.dumps({"prompt": "no id", "max_tokens": 2, "temperature": 0}),
]
prompts = os.path.join(work, "mixed.jsonl")
with open(prompts, "w") as f:
    f.write("\n".join(lines) + "\n")
out = os.path.join(work, "mixed-out.jsonl")
summary = os.path.join(work, "summary.json")
run(["run", prompts, "-o", out, "--summary", summary, "--quiet", "--ordered"] + MODEL, expect_rc=2)
rows = read_jsonl(out)
c.check(len(rows) == 8, f"{len(rows)} output lines for 8 non-blank input lines")
errors = {r["line"]: r for r in rows if "error" in r}
c.check(sorted(errors) == [2, 3, 5, 6, 7], f"error lines at {sorted(errors)}")
c.check("max_tokens" in errors.get(3, {}).get("error", {}).get("message", ""), "max_tokens error names the field")
c.check("9999" in errors.get(6, {}).get("error", {}).get("message", ""), "vocab error names the id")
c.check(all(e["error"]["message"].startswith(f"line {n}:") for n, e in errors.items()), "messages start with the line")
ids = [r["id"] for r in rows]
c.check(ids == ["ok1", 2, "neg", "noprompt", "vocab", "long", 42, 9], f"ordered ids {ids}")
s = json.load(open(summary))
c.check(s["requests_ok"] == 3 and s["requests_failed"] == 5, f"summary counts {s['requests_ok']}/{s['requests_failed']}")

# A pipeline: prompts on stdin, results on stdout, nothing else on stdout; exit 0. (The golden of this
# prompt runs to the full context, so 3 tokens never end on EOS.)
dream = GOLDEN["I dreamed of"]
c.check(dream["stop"] == "length" and len(dream["output_ids"]) > 3, "golden 'I dreamed of' runs past 3 tokens")
stdin = json.dumps({"id": "p", "prompt": dream["prompt"], "max_tokens": 3, "temperature": 0}) + "\n"
proc = run(["run", "-"] + MODEL, stdin=stdin)
out_rows = [json.loads(line) for line in proc.stdout.splitlines()]
c.check(len(out_rows) == 1 and out_rows[0]["id"] == "p" and out_rows[0]["completion_tokens"] == 3, "stdin/stdout run")
c.check(out_rows and out_rows[0].get("output_token_ids") == dream["output_ids"][:3],
        "stdin/stdout run: not the golden's ids")
c.check(set(out_rows[0]) >= {"id", "text", "output_token_ids", "finish_reason", "prompt_tokens",
                             "completion_tokens", "metrics"}, "output line fields")
c.check(set(out_rows[0]["metrics"]) == {"ttft_ms", "e2e_ms", "first_step", "finish_step"}, "metrics fields")

# An output that cannot be synced to disk (a device) is fine.
run(["run", "-", "-o", os.devnull] + MODEL, stdin=stdin)

# Stop strings and stop token ids: the text never includes the stop string. The empty prompt's golden
# (float64 reference) gives the uncut text; its max_tokens says how far its tokens are safe from near-ties.
empty = GOLDEN[""]
c.check(empty["max_tokens"] >= 60 and len(empty["output_ids"]) >= 60, "empty prompt's golden shorter than 60 tokens")
golden_text, golden_ids = empty["output_text"], empty["output_ids"][:60]
stop = golden_text[40:44]  # cut where it first occurs, at most 40 characters in
stop_at = next(k for k in range(20, 60) if golden_ids.index(golden_ids[k]) == k)  # a first occurrence past 20
stop_rows = [{"id": "s1", "prompt": "", "max_tokens": 60, "temperature": 0},
             {"id": "s2", "prompt": "", "max_tokens": 60, "temperature": 0, "stop": [stop]},
             {"id": "s3", "prompt": "", "max_tokens": 60, "temperature": 0, "stop_token_ids": [golden_ids[stop_at]]}]
write_jsonl(prompts, stop_rows)
run(["run", prompts, "-o", out, "--quiet"] + MODEL)
res = {r["id"]: r for r in read_jsonl(out)}
full = res["s1"]["text"]
c.check(res["s1"]["output_token_ids"] == golden_ids and golden_text.startswith(full) and stop in full,
        f"uncut text {full!r} is not the golden's first 60 tokens, or lacks {stop!r}")
c.check(res["s2"]["text"] == golden_text[:golden_text.index(stop)] and res["s2"]["finish_reason"] == "stop",
        f"stop string {stop!r}: {res['s2']['text']!r}, {res['s2']['finish_reason']}")
c.check(res["s3"]["output_token_ids"] == golden_ids[:stop_at + 1] and res["s3"]["finish_reason"] == "stop",
        f"stop token id {golden_ids[stop_at]} (golden position {stop_at}): {res['s3']['output_token_ids']}")
c.done()
