"""Every dense family on the CUDA backend (skipped without a GPU), on the tiny seeded models of
tiny_models.py that test_families.py checks on the CPU (Llama, Mistral and Qwen2 windows, Qwen3 q/k norms,
Gemma 2 softcaps and query scale, Gemma 3 local/global RoPE, Phi-3's fused projections, SmolLM3's NoPE
layers and YaRN):
- with --dtype fp32, the greedy tokens of each HF directory and each GGUF on CUDA equal the float64
  reference of that file (family_reference.py) up to each request's first step whose top-2 margin is at
  most 1e-3 (where float32 rounding may pick either token); bf16's leading agreement is printed;
- per family, the CUDA outputs are the same across modes, token budgets (chunked prefill) and sequence caps.
A family whose kernels are wrong on the GPU fails here by name."""
import os
import random
import time

from common import Checks, need_cuda_device, need_modules, tmpdir

need_cuda_device()
need_modules("numpy", "gguf")
import family_reference as reference  # noqa: E402
import tiny_models  # noqa: E402
from gpu_common import Runs, check_decisive, print_agreement, write_prompts  # noqa: E402

NUM_TOKENS = 16
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--max-num-seqs": "2"}]

c = Checks()
work = tmpdir()
rng = random.Random(17)  # test_families.py's prompts: 20-60 tokens, longer than every window
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60)]
prompts.append(prompts[3][:40] + [rng.randrange(3, 256) for _ in range(12)])
runs = Runs(work, write_prompts(os.path.join(work, "prompts.jsonl"), prompts, NUM_TOKENS))


def check_model(label, path, expected):
    """CUDA fp32 against the reference's decisive tokens; bf16's agreement with them printed."""
    got = runs.tokens(path)
    check_decisive(c, label, got, expected, reference.agreed_prefix, NUM_TOKENS, 0.8)
    print_agreement(label, runs.tokens(path, {"--dtype": "bf16"}), expected, NUM_TOKENS)
    return got


start = time.time()
families_checked = set()
dense = {name: spec for name, spec in tiny_models.MODELS.items() if not spec.get("moe") and not spec.get("gpt_oss")}
for name, spec in dense.items():
    weights = tiny_models.random_weights(name)
    hf_dir = os.path.join(work, name)
    tiny_models.write_hf(hf_dir, name, weights)
    base = check_model(f"{name} hf", hf_dir, reference.greedy(reference.load_hf(hf_dir), prompts, NUM_TOKENS))
    if spec.get("gguf", True):
        gguf = hf_dir + ".gguf"
        tiny_models.write_gguf(gguf, name, weights)
        check_model(f"{name} gguf", gguf, reference.greedy(reference.load_gguf(gguf), prompts, NUM_TOKENS))
    if spec["family"] not in families_checked:
        families_checked.add(spec["family"])
        for options in INVARIANCE:
            c.check(runs.tokens(hf_dir, options) == base, f"{name}: CUDA outputs change with {options}")
print(f"{len(dense)} models, {len(families_checked)} families in {time.time() - start:.1f} s")
c.done()
