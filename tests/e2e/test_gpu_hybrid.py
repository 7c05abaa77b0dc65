"""Hybrid models on the CUDA backend (skipped without a GPU): the tiny seeded Qwen3.5 and Qwen3.5-MoE of
tiny_hybrid_models.py (gated DeltaNet layers beside gated, partially rotated attention) that
test_hybrid_qwen35.py checks on the CPU, and those test_hybrid_ssm.py does: LFM2 (short convs beside
attention), Granite 4.0-H dense and MoE (Mamba-2 beside attention without positions; the embedding, residual,
attention and logit multipliers; the MoE's ungated shared MLP) and Nemotron-H (Mamba-2, attention and relu^2
MLP layers, each a single sublayer):
- with --dtype fp32, the greedy tokens of each HF directory and each GGUF (its value heads tiled) on CUDA
  equal the float64 reference of that file (hybrid_reference.py) up to each request's first step whose top-2
  margin is at most 1e-3; bf16's leading agreement is printed;
- the CUDA outputs are the same across modes, token budgets (a prompt's state carried over chunks), sequence
  caps, n = 2 (a fork copies its parent's state) and preemption under a small cache (its state rebuilt);
- Qwen3-Next's grouped projections are refused by name.
A wrong kernel or state handling fails here by name."""
import os
import random

from common import Checks, need_cuda_device, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_cuda_device()
need_modules("numpy", "gguf")
import hybrid_reference as reference  # noqa: E402
import tiny_hybrid_models as tiny  # noqa: E402
from gpu_moe_common import leading_agreement  # noqa: E402

MARGIN = 1e-3
NUM_TOKENS = 12
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--max-num-seqs": "8", "--device": "cuda",
        "--dtype": "fp32"}
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--max-num-batched-tokens": "7", "--block-size": "8"}, {"--max-num-seqs": "2"},
              {"--kv-cache-blocks": "12", "--block-size": "8", "--max-num-batched-tokens": "16"}]

c = Checks()
work = tmpdir()
rng = random.Random(17)  # test_hybrid_qwen35.py's prompts
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60, 5, 1)]
prompts.append(prompts[3][:40] + [rng.randrange(3, 256) for _ in range(12)])
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0,
                            "ignore_eos": True} for i, p in enumerate(prompts)])
forked_path = os.path.join(work, "forked.jsonl")
write_jsonl(forked_path, [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0,
                           "ignore_eos": True, "n": 2} for i, p in enumerate(prompts)])


def outputs(model, options=None, path=prompts_path, check=True):
    out = os.path.join(work, "out.jsonl")
    flags = [x for k, v in dict(BASE, **(options or {})).items() for x in (k, v)]
    proc = run(["run", path, "-o", out, "--model", model, "--quiet"] + flags, check=check)
    if not check:
        return proc
    rows = sorted(read_jsonl(out), key=lambda r: r["id"])
    return [[o["output_token_ids"] for o in r["outputs"]] if "outputs" in r else r.get("output_token_ids") or []
            for r in rows]


def check_model(label, path, model):
    expected = reference.greedy(model, prompts, NUM_TOKENS)
    got = outputs(path)
    compared = 0
    for i, (ids, margins) in enumerate(expected):
        want = ids[:reference.agreed_prefix(ids, margins, MARGIN)]
        compared += len(want)
        n = leading_agreement(got[i], want)
        c.check(n == len(want), f"{label} fp32 prompt {i}: CUDA agrees with the reference for {n} of {len(want)} "
                                f"decisive tokens\n  cuda      {got[i][:len(want)]}\n  reference {want}")
    c.check(compared >= 0.8 * len(prompts) * NUM_TOKENS, f"{label}: only {compared} decisive reference tokens")
    bf16 = outputs(path, {"--dtype": "bf16"})
    print(f"{label} bf16 leading tokens equal to the reference per prompt:",
          [leading_agreement(b, ids) for b, (ids, _) in zip(bf16, expected)], f"of {NUM_TOKENS}")
    return got


for name in ("qwen3_5", "qwen3_5_moe", "lfm2", "granite_h", "granite_h_moe", "nemotron_h"):
    hf_dir, gguf_path = tiny.write_model(work, name)
    base = check_model(f"{name} hf", hf_dir, reference.load_hf(hf_dir))
    check_model(f"{name} gguf", gguf_path, reference.load_gguf(gguf_path))
    for options in INVARIANCE:
        c.check(outputs(hf_dir, options) == base, f"{name} {options}: outputs differ from the base run")
    forked = outputs(hf_dir, path=forked_path)
    c.check(forked == [[ids, ids] for ids in base], f"{name} n = 2: a greedy sample differs from n = 1's")

hf_dir, _ = tiny.write_model(work, "qwen3_next")
proc = outputs(hf_dir, check=False)
c.check(proc.returncode == 1 and "grouped by key head" in proc.stderr,
        f"qwen3_next on CUDA: exit {proc.returncode}, stderr {proc.stderr[-300:]}")
c.done()
