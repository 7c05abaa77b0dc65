"""Every family (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3) on a seeded random-weight tiny
model written both as a Hugging Face directory and as a GGUF with the same weights (tiny_models.py):
cbatch's greedy outputs from BOTH formats equal an independent float64 numpy reference of the family
(family_reference.py) wherever the reference's top-2 margin is above 1e-3, on prompts longer than the
windows; `cbatch inspect` names the architecture; and outputs are bit-identical across modes, token
budgets (chunked prefill), block sizes and sequence caps, with the prefix cache on and off."""
import os
import random

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import tiny_models  # noqa: E402
from family_reference import FamilyReference  # noqa: E402

MARGIN = 1e-3
NUM_TOKENS = 12
c = Checks()
work = tmpdir()
rng = random.Random(17)
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60)]
rows = [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
        for i, p in enumerate(prompts)]
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, rows)


def outputs(model, extra=()):
    out = os.path.join(work, "out.jsonl")
    run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + list(extra))
    return {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}


for seed, family in enumerate(tiny_models.FAMILIES):
    weights = tiny_models.random_weights(family, seed + 1)
    hf_dir, gguf_path = os.path.join(work, family), os.path.join(work, family + ".gguf")
    tiny_models.write_hf(hf_dir, family, weights)
    tiny_models.write_gguf(gguf_path, family, weights)
    reference = FamilyReference(hf_dir)
    expected = [reference.greedy(p, NUM_TOKENS) for p in prompts]
    for fmt, model in (("hf", hf_dir), ("gguf", gguf_path)):
        arch = run(["inspect", "--model", model]).stdout
        want_arch = tiny_models.GGUF_ARCH.get(family, family) if fmt == "gguf" else family  # Mistral GGUFs are `llama`
        c.check(f"architecture: {want_arch}" in arch, f"{family} {fmt}: inspect says {arch.splitlines()[2:4]}")
        got = outputs(model)
        for i, (ids, margins) in enumerate(expected):
            for step, (want, margin) in enumerate(zip(ids, margins)):
                if margin <= MARGIN:
                    break
                if got[i][step] != want:
                    c.check(False, f"{family} {fmt} prompt {i} step {step}: cbatch {got[i]} != reference {ids}")
                    break
            else:
                c.check(True, "")
    # Invariance on the HF model: every scheduling shape gives the same bits.
    base = outputs(hf_dir)
    for extra in (["--mode", "static"], ["--mode", "sequential"], ["--max-num-batched-tokens", "7"],
                  ["--block-size", "4", "--max-num-seqs", "2"], ["--block-size", "1", "--no-enable-prefix-caching"],
                  ["--kv-cache-blocks", "12", "--block-size", "8", "--max-num-seqs", "3"]):
        c.check(outputs(hf_dir, extra) == base, f"{family}: outputs change with {' '.join(extra)}")
c.done()
