"""Gemma 4 on the CUDA backend (skipped without a GPU), on the seeded tiny models of tiny_gemma4_models.py that
test_gemma4.py checks on the CPU:
- "dense" (per-layer inputs, layer scalars, the V norm, values that are the keys, proportional RoPE, the last
  two layers reading the K/V of layers 3 and 2 with double-wide FFNs, global layers of their own head size and
  K/V heads: 32 over 1 against the sliding layers' 16 over 2),
  "wide" ("dense" at the checkpoints' head sizes: 512 and 256, the head-512 tile kernel) and
  "moe" (every layer's dense MLP beside 8 experts, top 2, with the router's own norm and scales): with
  --dtype fp32 the greedy tokens of the HF directory and the GGUF on CUDA equal the float64 reference
  (gemma4_reference.py) up to each request's first step whose top-2 margin is at most 1e-3, their logprobs
  within 1e-3, and equal the CPU backend's tokens over the same prefix; bf16's leading agreement is printed;
- the CUDA outputs are the same across modes, token budgets (chunked prefill), sequence caps and a KV cache small
  enough to preempt.
A wrong kernel, a layer of the wrong shape or a layer reading the wrong cache fails here by name."""
import os
import random

from common import Checks, need_cuda_device, need_modules, tmpdir

need_cuda_device()
need_modules("numpy", "gguf")
import gemma4_reference as reference  # noqa: E402
import tiny_gemma4_models as tiny  # noqa: E402
from gpu_common import Runs, check_decisive, print_agreement, tokens, write_prompts  # noqa: E402

LOGPROB_TOLERANCE = 1e-3
NUM_TOKENS = 12
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--max-num-batched-tokens": "7", "--block-size": "8"}, {"--max-num-seqs": "2"},
              {"--kv-cache-blocks": "21", "--block-size": "8", "--max-num-batched-tokens": "16"}]

c = Checks()
work = tmpdir()
rng = random.Random(23)  # test_gemma4.py's prompts: longer than the window of 8
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60, 5, 1)]
prompts.append(prompts[3][:40] + [rng.randrange(3, 256) for _ in range(12)])
runs = Runs(work, write_prompts(os.path.join(work, "prompts.jsonl"), prompts, NUM_TOKENS, logprobs=1))
results = runs.results


def check_model(label, path, expected):
    got = results(path)
    cpu = tokens(results(path, {"--device": "cpu", "--dtype": "auto"}))
    decisive = check_decisive(c, label, tokens(got), expected, reference.agreed_prefix, NUM_TOKENS, 0.7)
    for i, (n_want, (ids, _, logprobs)) in enumerate(zip(decisive, expected)):
        want = ids[:n_want]
        c.check(cpu[i][:n_want] == want, f"{label} prompt {i}: the CPU's tokens {cpu[i][:n_want]} against {want}")
        got_lp = [e["logprob"] for e in got[i]["logprobs"]][:n_want]
        worst = max((abs(a - b) for a, b in zip(got_lp, logprobs)), default=0.0)
        c.check(worst < LOGPROB_TOLERANCE, f"{label} prompt {i}: a CUDA logprob is {worst:.2e} from the reference's")
    print_agreement(label, tokens(results(path, {"--dtype": "bf16"})), expected, NUM_TOKENS)
    return tokens(got)


for name, cases in (("dense", INVARIANCE), ("wide", INVARIANCE[::3]), ("moe", INVARIANCE[::2])):
    hf_dir, gguf_path = tiny.write_model(work, name)
    base = check_model(f"{name} hf", hf_dir, reference.greedy(reference.load_hf(hf_dir), prompts, NUM_TOKENS))
    gguf = check_model(f"{name} gguf", gguf_path,
                       reference.greedy(reference.load_gguf(gguf_path), prompts, NUM_TOKENS))
    c.check(gguf == base, f"{name}: the GGUF gives other CUDA tokens than the directory")
    for options in cases:
        c.check(tokens(results(hf_dir, options)) == base, f"{name} {options}: CUDA outputs differ from the base run")
c.done()
