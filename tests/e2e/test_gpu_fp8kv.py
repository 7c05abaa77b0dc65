"""--kv-cache-dtype fp8 end to end on the GPU (skipped without one, and below compute capability 8.9, where
cbatch refuses the flag): on the dummy SmolLM2-135M shape every request completes with its token budget in
every mode, the KV blocks all come back, a rerun is identical, and how many leading greedy tokens agree
with the bf16 cache is printed per prompt; on SmolLM2-135M and Gemma 3 270M, where present, the greedy
agreement rate with the bf16 cache is printed (FP8 rounds every key and value: a few prompts are expected
to diverge after some tokens, so the rates are reported, not checked)."""
import os
import random
import sys

from common import (GEMMA3, ROOT, SKIP, SMOLLM2, Checks, cuda_device, leading_agreement, need_cuda_device, read_jsonl,
                    run, tmpdir, write_jsonl)

need_cuda_device()
c = Checks()
work = tmpdir()
SMOL = ["--model", "dummy:" + os.path.join(ROOT, "examples", "models", "smollm2-135m.json")]
FP8 = ["--kv-cache-dtype", "fp8"]


def run_outputs(prompts, model, extra, trace=None, kernels=()):
    out = os.path.join(work, "out.jsonl")
    args = ["run", prompts, "-o", out, "--quiet"] + cuda_device(*kernels) + ["--dtype", "bf16"] + model + extra
    proc = run(args + (["--trace", trace] if trace else []), check=False)
    if proc.returncode != 0 and "compute capability 8.9" in proc.stderr:
        print("SKIPPED: " + proc.stderr.strip().splitlines()[-1])
        sys.exit(SKIP)
    c.check(proc.returncode == 0, f"cbatch {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    rows = read_jsonl(out) if proc.returncode == 0 else []
    return {r["id"]: r.get("output_token_ids") for r in rows}


rng = random.Random(8)
rows = [{"id": f"s{i}", "prompt_token_ids": [rng.randrange(3, 49152) for _ in range(rng.randint(5, 300))],
         "max_tokens": 32, "temperature": 0, "ignore_eos": True} for i in range(16)]
prompts = os.path.join(work, "smol.jsonl")
write_jsonl(prompts, rows)
bf16 = run_outputs(prompts, SMOL, [])
fp8 = run_outputs(prompts, SMOL, FP8)
c.check(all(len(fp8.get(r["id"]) or []) == 32 for r in rows), "fp8: a request without its 32 tokens")
c.check(run_outputs(prompts, SMOL, FP8) == fp8, "fp8: a second run differs from the first")
print("smollm2 dummy fp8 vs bf16 cache, leading greedy tokens equal per prompt:",
      [leading_agreement(fp8[r["id"]], bf16[r["id"]]) for r in rows], "of 32")

# Every mode and budget with the FP8 cache (and both decode kernels with an FP8 build): nothing lost,
# blocks returned.
for mode, budget, seqs, decode in [("continuous", 4096, 256, ""), ("continuous", 64, 8, "cuda-cores"),
                                   ("static", 512, 16, ""), ("sequential", 64, 1, "")]:
    trace = os.path.join(work, "t.jsonl")
    res = run_outputs(prompts, SMOL, FP8 + ["--mode", mode, "--max-num-batched-tokens", str(budget),
                                            "--max-num-seqs", str(seqs), "--block-size", "8"], trace,
                      ["decode=" + decode] if decode else [])
    name = f"{mode}/{budget}/{seqs}/{decode or 'default'}"
    c.check(len(res) == len(rows), f"{name}: {len(res)} results of {len(rows)}")
    c.check(read_jsonl(trace)[-1]["kv_blocks_used"] == 0, f"{name}: KV blocks left in use")
    print(f"{name}: {sum(res.get(k) == v for k, v in fp8.items())}/{len(rows)} outputs identical to continuous/4096")

# Real checkpoints where present: the greedy agreement rate of the FP8 cache with the bf16 one.
for path in (SMOLLM2, GEMMA3):
    if not os.path.exists(path):
        print(f"not run: {path} is absent")
        continue
    texts = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "Water boils at",
             "The three primary colors are", "In 1969, humans", "A good breakfast includes", "import numpy as np"]
    real = [{"id": f"r{i}", "prompt": t, "max_tokens": 48, "temperature": 0, "ignore_eos": True}
            for i, t in enumerate(texts)]
    real_prompts = os.path.join(work, "real.jsonl")
    write_jsonl(real_prompts, real)
    want = run_outputs(real_prompts, ["--model", path], [])
    got = run_outputs(real_prompts, ["--model", path], FP8)
    agree = [leading_agreement(got[r["id"]], want[r["id"]]) for r in real]
    same = sum(a == 48 for a in agree)
    print(f"{os.path.basename(path)}: fp8 vs bf16 cache, {same}/{len(real)} greedy outputs identical; "
          f"leading tokens equal per prompt {agree} of 48; token agreement {sum(agree) / (48 * len(real)):.3f}")
c.done()
