"""The CUDA backend end to end (skipped without a GPU): greedy outputs equal the CPU backend's with
--dtype fp32 on tiny-spm (and so its float64-reference goldens; aidreams260K's too when the optional
shared data is present) and on the dummy SmolLM2-135M shape; with bf16, how many leading tokens agree per
prompt is printed; every mode and token budget keeps the engine's
invariants on the GPU (no request lost, KV blocks all returned, a trace record per step); sampling on the
GPU gives the host sampler's tokens. Arguments (--cuda-kernel NAME=VALUE) go to every CUDA run."""
import json
import os
import random

from common import (EXACT, ROOT, Checks, cuda_device, leading_agreement, need_cuda_device, read_jsonl, run,
                    shared_extra, tiny_spm_gguf, tmpdir, write_jsonl)

need_cuda_device()
c = Checks()
work = tmpdir()
TINY_SPM = tiny_spm_gguf()
GGUF = ["--model", TINY_SPM]
SMOL = ["--model", "dummy:" + os.path.join(ROOT, "examples", "models", "smollm2-135m.json")]


def outputs(path):
    return {r["id"]: r["output_token_ids"] for r in read_jsonl(path) if "error" not in r}


def run_outputs(prompts, model, extra):
    out = os.path.join(work, "out.jsonl")
    run(["run", prompts, "-o", out, "--quiet"] + model + extra)
    return outputs(out)


def check_goldens(label, gguf, golden_path):
    """Greedy goldens: CUDA fp32 equals the CPU backend and the goldens; bf16's leading agreement printed."""
    golden = read_jsonl(golden_path)
    prompts = os.path.join(work, f"golden-{label}.jsonl")
    write_jsonl(prompts, [{"id": g["id"], "prompt": g["prompt"], "max_tokens": g.get("max_tokens", 1000),
                           "temperature": 0} for g in golden])
    model = ["--model", gguf]
    cpu = run_outputs(prompts, model, ["--device", "cpu"] + EXACT)
    gpu32 = run_outputs(prompts, model, cuda_device() + ["--dtype", "fp32"])
    for g in golden:
        c.check(gpu32.get(g["id"]) == g["output_ids"], f"{label} fp32 {g['id']}: CUDA differs from the golden")
        c.check(gpu32.get(g["id"]) == cpu.get(g["id"]), f"{label} fp32 {g['id']}: CUDA differs from CPU")
    gpu16 = run_outputs(prompts, model, cuda_device() + ["--dtype", "bf16"])
    agree = [leading_agreement(gpu16[g["id"]], g["output_ids"]) for g in golden]
    print(f"{label} bf16 leading tokens equal to the golden per prompt:", agree,
          "of", [len(g["output_ids"]) for g in golden])


check_goldens("tiny-spm", TINY_SPM, os.path.join(os.path.dirname(TINY_SPM), "golden", "greedy.jsonl"))
aidreams = shared_extra(os.path.join("models", "aidreams260K"))
if aidreams:
    check_goldens("aidreams260K", os.path.join(aidreams, "aidreams260K.gguf"),
                  os.path.join(aidreams, "golden", "greedy.jsonl"))

# Dummy SmolLM2-135M shape (GQA 9/3, head_dim 64, rotate-half RoPE): fp32 CUDA equals CPU.
rng = random.Random(5)
rows = [{"id": f"s{i}", "prompt_token_ids": [rng.randrange(3, 49152) for _ in range(rng.randint(5, 300))],
         "max_tokens": 32, "temperature": 0, "ignore_eos": True} for i in range(12)]
prompts = os.path.join(work, "smol.jsonl")
write_jsonl(prompts, rows)
cpu = run_outputs(prompts, SMOL, ["--device", "cpu"] + EXACT)
gpu32 = run_outputs(prompts, SMOL, cuda_device() + ["--dtype", "fp32"])
for r in rows:
    c.check(gpu32.get(r["id"]) == cpu.get(r["id"]),
            f"smollm2 fp32 {r['id']}: CUDA agrees with CPU for {leading_agreement(gpu32[r['id']], cpu[r['id']])}/32")
gpu16 = run_outputs(prompts, SMOL, cuda_device() + ["--dtype", "bf16"])
print("smollm2 dummy bf16 leading tokens equal to CPU fp32 per prompt:",
      [leading_agreement(gpu16[r["id"]], cpu[r["id"]]) for r in rows], "of 32")

# Every mode and budget on the GPU: nothing lost, blocks returned, one trace record per step.
rows = [{"id": f"m{i}", "prompt_token_ids": [1] + [rng.randrange(3, 512) for _ in range(rng.randint(0, 90))],
         "max_tokens": rng.randint(1, 30), "temperature": 0 if i % 2 else 0.8, "seed": i} for i in range(120)]
prompts = os.path.join(work, "modes.jsonl")
write_jsonl(prompts, rows)
reference = None
for mode, budget, seqs, blocks in [("continuous", 4096, 256, None), ("continuous", 16, 32, None),
                                   ("continuous", 128, 64, 24), ("static", 512, 16, None), ("sequential", 64, 1, None)]:
    out, trace = os.path.join(work, "m.jsonl"), os.path.join(work, "t.jsonl")
    args = ["run", prompts, "-o", out, "--trace", trace, "--quiet"] + cuda_device() + [
        "--dtype", "fp32", "--mode", mode, "--max-num-batched-tokens", str(budget), "--max-num-seqs", str(seqs),
        "--block-size", "8"] + GGUF
    if blocks:
        args += ["--kv-cache-blocks", str(blocks)]
    run(args)
    res, steps = outputs(out), read_jsonl(trace)
    name = f"{mode}/{budget}/{seqs}/{blocks}"
    c.check(len(res) == len(rows), f"{name}: {len(res)} results of {len(rows)}")
    c.check([s["step"] for s in steps] == list(range(len(steps))), f"{name}: trace steps not contiguous")
    c.check(steps[-1]["kv_blocks_used"] == 0, f"{name}: KV blocks left in use")
    if blocks:
        c.check(sum(s["preempted"] for s in steps) > 0, f"{name}: no preemption")
    if reference is None:
        reference = res
    same = sum(res[k] == reference[k] for k in reference)
    print(f"{name}: {same}/{len(rows)} outputs identical to continuous/4096 on the GPU")

# Sampling on the GPU (the default; --cuda-kernel sampling=host copies the logits back instead) draws the host
# sampler's tokens from the same logits: every output, greedy or sampled with top-k, top-p, min-p and penalties,
# equals the run that copies the logits to the host.
rows = [{"id": f"s{i}", "prompt_token_ids": [1] + [rng.randrange(3, 49152) for _ in range(rng.randint(0, 60))],
         "max_tokens": 24, "ignore_eos": True, "temperature": [0, 0.7, 1.0, 1.3][i % 4], "top_p": [1, 0.9][i % 2],
         "top_k": [-1, -1, 20][i % 3], "min_p": 0.05 if i % 5 == 0 else 0, "seed": i,
         "repetition_penalty": 1.3 if i % 6 == 1 else 1, "frequency_penalty": 0.5 if i % 7 == 2 else 0,
         "presence_penalty": -0.4 if i % 8 == 3 else 0} for i in range(64)]
prompts = os.path.join(work, "sampling.jsonl")
write_jsonl(prompts, rows)
host = run_outputs(prompts, SMOL, cuda_device("sampling=host"))
device = run_outputs(prompts, SMOL, cuda_device("sampling=device"))  # the default, named: holds whatever it is
same = sum(device.get(k) == v for k, v in host.items())
c.check(len(host) == len(rows) and device == host, f"device sampling: {same}/{len(rows)} outputs equal to host sampling")

# logit_bias on CUDA: the steps with a biased row return logits and the host sampler applies the bias;
# biased rows get their token (+100) or lose it (-100), the unbiased rows of the same steps are unchanged.
biased = [dict(r, id="b" + r["id"], logit_bias={"4242": 100}) for r in rows[:8]] + \
         [dict(r, id="d" + r["id"], temperature=0, logit_bias={str(device[r["id"]][0]): -100}) for r in rows[8:16]]
write_jsonl(prompts, rows[16:] + biased)
mixed = run_outputs(prompts, SMOL, cuda_device())
c.check(all(mixed["b" + r["id"]] == [4242] * 24 for r in rows[:8]), "logit_bias +100 on CUDA: not every token forced")
c.check(all(mixed["d" + r["id"]][0] != device[r["id"]][0] for r in rows[8:16]), "logit_bias -100 on CUDA: token kept")
c.check(all(mixed[r["id"]] == device[r["id"]] for r in rows[16:]), "logit_bias on CUDA changed unbiased rows")
c.done()
