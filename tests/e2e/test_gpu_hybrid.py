"""Hybrid models on the CUDA backend (skipped without a GPU): the tiny seeded Qwen3.5, Qwen3.5-MoE and
Qwen3-Next of tiny_hybrid_models.py (gated DeltaNet layers beside gated, partially rotated attention;
Qwen3-Next's DeltaNet projections grouped by key head in its files, which the upload puts in Qwen3.5's order)
that test_hybrid_qwen35.py checks on the CPU, and those test_hybrid_ssm.py does: LFM2 (short convs beside
attention), Granite 4.0-H dense and MoE (Mamba-2 beside attention without positions; the embedding, residual,
attention and logit multipliers; the MoE's ungated shared MLP) and Nemotron-H (Mamba-2, attention and relu^2
MLP layers, each a single sublayer):
- with --dtype fp32, the greedy tokens of each HF directory and each GGUF (its value heads tiled; Qwen3-Next's
  ssm_ba grouped) on CUDA equal the float64 reference of that file (hybrid_reference.py) up to each request's
  first step whose top-2 margin is at most 1e-3; bf16's leading agreement is printed;
- the CUDA outputs are the same across modes, token budgets (a prompt's state carried over chunks), sequence
  caps, n = 2 (a fork copies its parent's state) and preemption under a small cache (its state rebuilt): bit
  for bit with the token-by-token delta rule and Mamba-2 scan (--cuda-kernel deltanet=recurrent,
  mamba-scan=recurrent; LFM2 has only its token-by-token conv); with the chunked ones (the default, which
  prompts of 130 and 200 tokens take) each of those runs agrees with the reference's decisive tokens instead,
  as their sums follow the chunks.
A wrong kernel, state handling or row order fails here by name."""
import os
import random

from common import Checks, need_cuda_device, need_modules, tmpdir

need_cuda_device()
need_modules("numpy", "gguf")
import hybrid_reference as reference  # noqa: E402
import tiny_hybrid_models as tiny  # noqa: E402
from gpu_common import Runs, check_decisive, print_agreement, write_prompts  # noqa: E402

NUM_TOKENS = 12
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--max-num-batched-tokens": "7", "--block-size": "8"}, {"--max-num-seqs": "2"},
              {"--kv-cache-blocks": "32", "--block-size": "8", "--max-num-batched-tokens": "16"}]
RECURRENT = {"--cuda-kernel": "deltanet=recurrent"}
MAMBA_RECURRENT = {"--cuda-kernel": "mamba-scan=recurrent"}
DELTANET_MODELS = ("qwen3_5", "qwen3_5_moe", "qwen3_next")
MAMBA_MODELS = ("granite_h", "granite_h_moe", "nemotron_h")

c = Checks()
work = tmpdir()
rng = random.Random(17)  # test_hybrid_qwen35.py's prompts
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60, 5, 1)]
prompts.append(prompts[3][:40] + [rng.randrange(3, 256) for _ in range(12)])
prompts += [[rng.randrange(3, 256) for _ in range(n)] for n in (130, 200)]  # chunked: 2 and 4 chunks
runs = Runs(work, write_prompts(os.path.join(work, "prompts.jsonl"), prompts, NUM_TOKENS))
forked_path = write_prompts(os.path.join(work, "forked.jsonl"), prompts, NUM_TOKENS, n=2)


def check_model(label, path, expected, kernel=None):
    got = runs.tokens(path, kernel)
    check_decisive(c, label, got, expected, reference.agreed_prefix, NUM_TOKENS, 0.8)
    if not kernel:
        print_agreement(label, runs.tokens(path, {"--dtype": "bf16"}), expected, NUM_TOKENS)
    return got


def check_invariance(name, hf_dir, expected, kernel, exact):
    """The runs of INVARIANCE and n = 2 with kernel's flags: equal to the base run (exact), or each agreeing
    with the reference's decisive tokens."""
    label = f"{name} hf" + "".join(f" {v}" for v in kernel.values())
    base = check_model(label, hf_dir, expected, kernel)
    for options in INVARIANCE:
        got = runs.tokens(hf_dir, dict(options, **kernel))
        if exact:
            c.check(got == base, f"{label} {options}: outputs differ from the base run")
        else:
            check_decisive(c, f"{label} {options}", got, expected, reference.agreed_prefix, NUM_TOKENS, 0.8)
    forked = runs.tokens(hf_dir, kernel, path=forked_path)
    if exact:
        c.check(forked == [[ids, ids] for ids in base], f"{label} n = 2: a greedy sample differs from n = 1's")
    else:
        for sample in (0, 1):
            check_decisive(c, f"{label} n = 2 sample {sample}", [f[sample] for f in forked], expected,
                           reference.agreed_prefix, NUM_TOKENS, 0.8)


for name in ("qwen3_5", "qwen3_5_moe", "qwen3_next", "lfm2", "granite_h", "granite_h_moe", "nemotron_h"):
    hf_dir, gguf_path = tiny.write_model(work, name)
    expected = reference.greedy(reference.load_hf(hf_dir), prompts, NUM_TOKENS)
    check_model(f"{name} gguf", gguf_path, reference.greedy(reference.load_gguf(gguf_path), prompts, NUM_TOKENS))
    if name in DELTANET_MODELS:
        check_invariance(name, hf_dir, expected, RECURRENT, exact=True)
    if name in MAMBA_MODELS:
        check_invariance(name, hf_dir, expected, MAMBA_RECURRENT, exact=True)
    check_invariance(name, hf_dir, expected, {}, exact=name not in DELTANET_MODELS + MAMBA_MODELS)
c.done()
