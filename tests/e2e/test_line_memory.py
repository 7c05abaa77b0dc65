"""The memory of one wide line stays a small multiple of its size: a request's shared parts (sampling
parameters, stops, documents, embedding options) are held once by its sequences, never copied into each.
Each case measures the peak resident memory of one run with a wide line against the same work spread over
many lines (or with n = 1); the difference may be a small multiple of the line's own bytes (in and out)
plus 1 KiB for each of its sequences (its tokens and state, which are its own) and 8 MiB for the
allocator's noise: memory, never a time. Also: a line that would become more sequences than a line may run is an error line
that names the limit."""
import json
import os
import subprocess
import sys

from common import BIN, Checks, read_jsonl, tiny_dummy_model, tmpdir, write_jsonl

work = tmpdir()
MODEL = tiny_dummy_model(work)
EMBED = ["--task", "embed", "--pooling", "last"]
c = Checks()

# Runs cbatch in a child of a fresh Python, so that RUSAGE_CHILDREN is cbatch's peak alone.
PEAK = ("import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, repr(r.stderr[-500:]))\n")


def peak_mb(name, rows, extra=()):
    """(peak resident MB, bytes of the prompts file, bytes of the output file) of one run."""
    prompts, out = os.path.join(work, name + ".jsonl"), os.path.join(work, name + "-out.jsonl")
    write_jsonl(prompts, rows)
    proc = subprocess.run([sys.executable, "-c", PEAK, BIN, "run", prompts, "-o", out] + MODEL + list(extra),
                          capture_output=True, text=True, timeout=600)
    rc, kb, stderr = proc.stdout.split(" ", 2)
    c.check(rc == "0", f"{name}: cbatch exited {rc}: {stderr}")
    return int(kb) / 1024, os.path.getsize(prompts), os.path.getsize(out)


def compare(name, wide_rows, narrow_rows, num_sequences, extra=(), factor=4):
    """The wide run's peak above the narrow one's is at most `factor` times the wide line's bytes (in + out)
    plus 1 KiB a sequence and 8 MiB."""
    wide, line_bytes, out_bytes = peak_mb(name + "-wide", wide_rows, extra)
    narrow, _, _ = peak_mb(name + "-narrow", narrow_rows, extra)
    allowed = (factor * (line_bytes + out_bytes) + num_sequences * 1024) / 2**20 + 8
    print(f"{name}: one wide line {wide:.1f} MB peak, the same work narrow {narrow:.1f} MB; the line is "
          f"{line_bytes / 2**20:.2f} MB in, {out_bytes / 2**20:.2f} MB out: {wide - narrow:.1f} MB more, "
          f"{allowed:.1f} MB allowed")
    c.check(wide - narrow <= allowed, f"{name}: one line takes {wide - narrow:.1f} MB more than the same work "
                                      f"as many lines, over the {allowed:.1f} MB allowed")


def openai(custom_id, url, body):
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


# 20,000 embedding inputs: one /v1/embeddings line against 20,000 lines (each input was a copy of the
# whole request, truncation counts included: 1.6 GB before).
inputs = [f"w{i}" for i in range(20000)]
compare("embeddings", [openai("e", "/v1/embeddings", {"input": inputs})],
        [openai(f"e{i}", "/v1/embeddings", {"input": t}) for i, t in enumerate(inputs)], len(inputs), EMBED)

# A rerank line of 8,000 documents against 8,000 one-document lines (every pair held all documents: 2.2 GB).
docs = [f"document {i}" for i in range(8000)]
compare("rerank", [openai("r", "/v1/rerank", {"query": "q", "documents": docs})],
        [openai(f"r{i}", "/v1/rerank", {"query": "q", "documents": [d]}) for i, d in enumerate(docs)], len(docs) + 1,
        EMBED)

# 100,000 stop strings with n = 256 against n = 1 (each sample held the stop list: 0.8 GB).
stops = [f"stop-{i}" for i in range(100000)]
compare("n-samples", [{"id": "s", "prompt": "hello", "n": 256, "max_tokens": 2, "stop": stops}],
        [{"id": "s", "prompt": "hello", "n": 1, "max_tokens": 2, "stop": stops}], 256, ["--max-num-seqs", "256"])

# A /v1/completions list of 200 prompts with a long stop list against one prompt (each prompt's copy).
list_stops = [f"stop-{i}" for i in range(20000)]
compare("prompt-list",
        [openai("c", "/v1/completions", {"prompt": [f"p{i}" for i in range(200)], "max_tokens": 2, "stop": list_stops})],
        [openai("c", "/v1/completions", {"prompt": ["p0"], "max_tokens": 2, "stop": list_stops})], 200,
        ["--max-num-seqs", "256"])

# What cannot be shared (each sequence's tokens and state) is capped per line, with an error that says so.
prompts, out = os.path.join(work, "cap.jsonl"), os.path.join(work, "cap-out.jsonl")
write_jsonl(prompts, [openai("big", "/v1/completions", {"prompt": ["a"] * 200, "n": 1000, "max_tokens": 1}),
                      openai("wide", "/v1/embeddings", {"input": ["x"] * 100001}),
                      {"id": "ok", "prompt": "a", "max_tokens": 1}])
proc = subprocess.run([BIN, "run", prompts, "-o", out] + MODEL + EMBED, capture_output=True, text=True, timeout=600)
c.check(proc.returncode == 2, f"cap: exit {proc.returncode}, expected 2 (some lines failed)")
rows = {r.get("custom_id", r.get("id")): r for r in read_jsonl(out)}
for key, what in (("big", "200000 sequences (200 prompts x n = 1000)"), ("wide", "100001 sequences (100001 inputs)")):
    message = (rows.get(key, {}).get("error") or {}).get("message", "")
    c.check(what in message and "100000" in message, f"cap: {key}'s error names the count and the limit: {message!r}")
c.check("ok" in rows and "error" not in rows["ok"], "cap: the other lines run")
print(json.dumps({k: (v.get("error") or {}).get("message") for k, v in rows.items()})[:400])
c.done()
