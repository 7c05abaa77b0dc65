"""The float64 reference of the hybrid families (hybrid_reference.py) on its seeded tiny models
(tiny_hybrid_models.py), before cbatch runs them: no cbatch binary, no torch (tools/check_hybrid_reference.py
compares the reference with transformers). Per model:
- the reference read from the GGUF gives the directory's greedy tokens (the GGUF writer converts as llama.cpp's
  converter does, the loader undoes it), up to each request's first step with a top-2 margin of at most 1e-3;
  Granite's and Nemotron-H's attention has no positions, so their GGUF q/k row permutation is checked with RoPE
  switched on in both (the nope ablation);
- a prompt prefilled in chunks (1 token: the decode path; 6; 16) gives the last-position logits of the whole
  prompt within float64 rounding, and the same greedy tokens: the conv windows and recurrent states carry over;
- every layer kind of the family is in the model, and an MTP block in a GGUF is not read as a layer;
- the reference is sensitive: without any one feature (Model.features) the greedy tokens change, so a backend
  missing it would fail against the reference; Granite's logits_scaling divides every logit by one number and so
  never changes a greedy token: the margins must change instead."""
import os
import random
import time

import numpy as np

from common import Checks, tmpdir
import hybrid_reference as reference
import tiny_hybrid_models as tiny

MARGIN = 1e-3
NUM_TOKENS = 12
CHUNKS = (1, 6, 16)
MONOTONIC = {"logits_scaling"}
KINDS = {"qwen3_5": {"attention", "deltanet", "glu"}, "qwen3_5_moe": {"attention", "deltanet", "moe"},
         "qwen3_next": {"attention", "deltanet", "moe"}, "lfm2": {"attention", "shortconv", "glu"},
         "granite_h": {"attention", "mamba2", "glu"}, "granite_h_moe": {"attention", "mamba2", "moe"},
         "nemotron_h": {"attention", "mamba2", "relu2"}}

c = Checks()
work = tmpdir()
rng = random.Random(17)
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60)]


def decisive(results):
    return [ids[:reference.agreed_prefix(ids, margins, MARGIN)] for ids, margins in results]


def prefill_logits(m, prompt, chunk):
    return reference.logits(m, reference.prefill(m, prompt, reference.Sequence(m), chunk))


def check_chunks(name, m, expected):
    for chunk in CHUNKS:
        worst = max(float(np.abs(prefill_logits(m, p, chunk) - prefill_logits(m, p, None)).max()) for p in prompts)
        c.check(worst < 1e-9, f"{name}: prefill in chunks of {chunk} moves a logit by {worst:.2e}")
    chunked = reference.greedy(m, prompts, NUM_TOKENS, chunk=CHUNKS[1])
    c.check([ids for ids, _ in chunked] == [ids for ids, _ in expected],
            f"{name}: chunks of {CHUNKS[1]} give other tokens than a whole prefill")


def check_sensitive(name, m, expected):
    """Each feature's absence changes a decisive token of some prompt (tried prompt by prompt, stopping at the
    first change)."""
    want = decisive(expected)
    for feature in m.features():
        ablated = m.without(feature)
        if feature in MONOTONIC:
            got = reference.greedy(ablated, prompts[:1], NUM_TOKENS)[0]
            c.check(got[0][:len(want[0])] == want[0] and got[1] != expected[0][1],
                    f"{name}: without {feature} the tokens change or the margins do not")
            continue
        changed = any(reference.greedy(ablated, [p], NUM_TOKENS)[0][0][:len(w)] != w for p, w in zip(prompts, want))
        c.check(changed, f"{name}: the reference without {feature} gives the same tokens (a weak model)")


start = time.time()
for name, spec in tiny.MODELS.items():
    hf_dir, gguf_path = tiny.write_model(work, name)
    model = reference.load_hf(hf_dir)
    expected = reference.greedy(model, prompts, NUM_TOKENS)
    kinds = model.kinds()
    c.check(kinds == KINDS[name], f"{name}: layer kinds {sorted(kinds)}, expected {sorted(KINDS[name])}")
    c.check(sum(map(len, decisive(expected))) >= 0.8 * len(prompts) * NUM_TOKENS,
            f"{name}: only {sum(map(len, decisive(expected)))} decisive reference tokens")
    from_gguf = reference.load_gguf(gguf_path)
    c.check(len(from_gguf.layers) == len(model.layers),
            f"{name}: the GGUF reads as {len(from_gguf.layers)} layers, the directory as {len(model.layers)}")
    c.check(decisive(reference.greedy(from_gguf, prompts, NUM_TOKENS)) == decisive(expected),
            f"{name}: the GGUF's reference differs from the directory's")
    if "nope" in model.features():  # q/k rows the GGUF permutes: only a rotation shows whether they are restored
        c.check(decisive(reference.greedy(from_gguf.without("nope"), prompts, NUM_TOKENS)) ==
                decisive(reference.greedy(model.without("nope"), prompts, NUM_TOKENS)),
                f"{name}: with RoPE, the GGUF's reference differs from the directory's (q/k rows not restored)")
    check_chunks(name, model, expected)
    check_sensitive(name, model, expected)
    print(f"{name}: {len(model.features())} features, {time.time() - start:.1f} s")
print(f"{len(tiny.MODELS)} models in {time.time() - start:.1f} s")
c.done()
