"""Every family (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3, SmolLM3) on seeded random-weight
tiny models (tiny_models.py) written as Hugging Face directories (transformers 4 configs, a multimodal
Gemma 3, F32 and BF16, one file and shards) and as GGUF files with the same weights:
- the reference is sensitive: removing any one feature of a model from the float64 reference
  (family_reference.py) changes its greedy tokens (so cbatch missing it would fail below); the final-logit
  softcap is monotonic and so never changes a greedy token: it is the one feature not checked this way;
- the reference read from the GGUF agrees with the one read from the directory (the GGUF writer converts
  as llama.cpp does), except where the GGUF cannot say what the directory says (MODELS' gguf_differs);
- cbatch's greedy outputs of each directory and each GGUF equal the reference of that file, token for
  token, up to each request's first step whose top-2 margin is at most 1e-3; prompts are 20-60 tokens,
  longer than every window; `cbatch inspect` names the architecture;
- per family, outputs are bit-identical across modes, token budgets (chunked prefill), block sizes,
  sequence caps, the prefix cache off, and a small KV cache (12 blocks per KV group)."""
import collections
import math
import os
import random
import time

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import family_reference as reference  # noqa: E402
import tiny_models  # noqa: E402

MARGIN = 1e-3
NUM_TOKENS = 16
UNDETECTABLE = {"final_softcap"}
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--block-size": "16", "--max-num-seqs": "8"}
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--block-size": "4"}, {"--max-num-seqs": "2"},
              {"--max-num-batched-tokens": "7", "--block-size": "1", "--no-enable-prefix-caching": None},
              {"--kv-cache-blocks": "12", "--block-size": "8"}]

c = Checks()
work = tmpdir()
rng = random.Random(17)
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60)]
prompts.append(prompts[3][:40] + [rng.randrange(3, 256) for _ in range(12)])  # two blocks for the prefix cache
rows = [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
        for i, p in enumerate(prompts)]
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, rows)


def outputs(model, options=None):
    out = os.path.join(work, "out.jsonl")
    flags = [x for k, v in dict(BASE, **(options or {})).items() for x in ([k] if v is None else [k, v])]
    run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + flags)
    return [r["output_token_ids"] for r in sorted(read_jsonl(out), key=lambda r: r["id"])]


def decisive(results):
    """Per request, its reference ids up to the first step with a top-2 margin of at most MARGIN."""
    return [ids[:reference.agreed_prefix(ids, margins, MARGIN)] for ids, margins in results]


def check_equal(label, got, expected):
    compared = 0
    for i, ((ids, margins), want) in enumerate(zip(expected, decisive(expected))):
        compared += len(want)
        step = next((s for s, t in enumerate(want) if s >= len(got[i]) or got[i][s] != t), None)
        if step is None:
            c.check(True, "")
        else:
            c.check(False, f"{label} prompt {i} ({len(prompts[i])} tokens): first difference at step {step}, "
                           f"got {got[i][step] if step < len(got[i]) else None}, reference {want[step]} "
                           f"(margin {margins[step]:.4f})\n  got       {got[i][:len(want)]}\n  reference {want}")
    c.check(compared >= 0.8 * len(prompts) * NUM_TOKENS, f"{label}: only {compared} decisive reference tokens")


def check_sensitive(name, model, expected):
    want = decisive(expected)
    for feature in sorted(set(model.features()) - UNDETECTABLE):
        results = reference.greedy(model.without(feature), prompts, NUM_TOKENS)
        ablated = [ids[:len(w)] for (ids, _), w in zip(results, want)]
        c.check(ablated != want, f"{name}: the reference without {feature} gives the same tokens (a weak model)")


def kv_groups(windows):
    """The KV groups cbatch cuts the layers into (engine/model/kv_groups.hpp): each window's layers (0: full)
    in groups of the gcd of the counts. A block is one group's: the small cache below scales with them."""
    counts = list(collections.Counter(windows).values())
    return sum(counts) // math.gcd(*counts)


def check_inspect(label, model, arch):
    text = run(["inspect", "--model", model]).stdout
    c.check(f"architecture: {arch}\n" in text, f"{label}: inspect does not say 'architecture: {arch}':\n{text}")


start = time.time()
families_checked = set()
dense_models = {name: spec for name, spec in tiny_models.MODELS.items() if not spec.get("moe")}  # MoE: test_moe.py
for name, spec in dense_models.items():
    family = spec["family"]
    weights = tiny_models.random_weights(name)
    hf_dir = os.path.join(work, name)
    tiny_models.write_hf(hf_dir, name, weights)
    model = reference.load_hf(hf_dir)
    expected = reference.greedy(model, prompts, NUM_TOKENS)
    check_sensitive(name, model, expected)
    check_inspect(f"{name} hf", hf_dir, family)
    check_equal(f"{name} hf", outputs(hf_dir), expected)
    if spec.get("gguf", True):
        gguf_path = hf_dir + ".gguf"
        tiny_models.write_gguf(gguf_path, name, weights)
        expected_gguf = reference.greedy(reference.load_gguf(gguf_path), prompts, NUM_TOKENS)
        if not spec.get("gguf_differs"):
            c.check(decisive(expected_gguf) == decisive(expected),
                    f"{name}: the GGUF's reference differs from the directory's")
        check_inspect(f"{name} gguf", gguf_path, tiny_models.GGUF_ARCH.get(family, family))
        check_equal(f"{name} gguf", outputs(gguf_path), expected_gguf)
    if family not in families_checked:  # invariance: once per family, on its directory
        families_checked.add(family)
        base = outputs(hf_dir)
        for options in INVARIANCE:
            if "--kv-cache-blocks" in options:
                options = dict(options, **{"--kv-cache-blocks": str(12 * kv_groups(model.windows))})
            c.check(outputs(hf_dir, options) == base, f"{name}: outputs change with {options}")
print(f"{len(dense_models)} models in {time.time() - start:.1f} s")
c.done()
