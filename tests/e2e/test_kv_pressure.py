"""A KV cache far too small for the workload only ever causes preemption: in every mode the requests that
fit give the big-cache results, and a request that could never fit the whole cache gets an error line
naming the blocks it needs, never a hang; exit status 2."""
import json
import os
import random
import shutil
import subprocess

from common import BIN, Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
WORDS = "I dreamed of a quiet city where the robots sang softly under glass rivers and memory light".split()
BLOCKS, BLOCK_SIZE = 12, 4  # 48 token slots in all

rng = random.Random(11)
rows = []
for i in range(120):
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5)))
    rows.append({"id": f"p{i}", "prompt": prompt, "max_tokens": rng.randint(1, 30), "temperature": 0})
too_big = {f"p{i}" for i in range(0, 120, 17)}
for row in rows:
    if row["id"] in too_big:
        row["max_tokens"] = 100  # prompt + 100 tokens > 48 slots
c = Checks()
work = tmpdir()
prompts, ref_out = os.path.join(work, "prompts.jsonl"), os.path.join(work, "ref.jsonl")
write_jsonl(prompts, rows)
run(["run", prompts, "-o", ref_out] + MODEL)
reference = {r["id"]: (r["text"], r["output_token_ids"]) for r in read_jsonl(ref_out) if r["id"] not in too_big}

for mode in ["continuous", "static", "sequential"]:
    out, summary = os.path.join(work, f"{mode}.jsonl"), os.path.join(work, f"{mode}-summary.json")
    args = [BIN, "run", prompts, "-o", out, "--summary", summary, "--mode", mode, "--kv-cache-blocks", str(BLOCKS),
            "--block-size", str(BLOCK_SIZE), "--max-num-seqs", "8"] + MODEL
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        c.check(False, f"{mode}: the run hangs")
        continue
    c.check(proc.returncode == 2, f"{mode}: exit {proc.returncode}, expected 2: {proc.stderr[-300:]}")
    lines = read_jsonl(out)
    results = {r["id"]: (r["text"], r["output_token_ids"]) for r in lines if "error" not in r}
    errors = {r["id"]: r["error"]["message"] for r in lines if "error" in r}
    c.check(results == reference, f"{mode}: results differ from the big-cache run")
    c.check(set(errors) == too_big, f"{mode}: error lines for {sorted(errors)}, expected {sorted(too_big)}")
    c.check(all("KV blocks" in m and f"whole cache has {BLOCKS}" in m for m in errors.values()),
            f"{mode}: error messages {list(errors.values())[:1]}")
    s = json.load(open(summary))
    c.check(s["peak_kv_blocks"] <= BLOCKS, f"{mode}: peak KV blocks {s['peak_kv_blocks']}")
    if mode == "continuous":
        c.check(s["preemptions"] > 0, "continuous: the small cache caused no preemption")
shutil.rmtree(work, ignore_errors=True)
c.done()
