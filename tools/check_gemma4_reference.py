#!/usr/bin/env python3
"""A development check of tests/e2e/gemma4_reference.py against transformers' Gemma4ForCausalLM (not run in CI:
it needs torch). Each tiny Gemma 4 model (tests/e2e/tiny_gemma4_models.py) is built from its text config in float64
(eager attention, eager experts: the grouped-matmul experts refuse float64), given the tiny model's weights, and
compared with the reference read from the directory the tests write: every position's logits of a few prompts, and
three decode steps through transformers' cache (the shared layers reading the stored K/V). Two ways:
- "as is": transformers as it runs. It computes some steps in float32 even in a float64 model (Gemma4RMSNorm
  upcasts with .float(), eager attention's softmax takes dtype=torch.float32, the RoPE tables and the embedding
  scales are float32 buffers), hence differences of about 1e-5;
- "float64": those four steps made float64 (patched here), which must agree to about 1e-12.
Prints the largest |logit difference| per model and way, and fails when the float64 one is above --tolerance.
    tools/check_gemma4_reference.py [--models dense,moe] [--tolerance 1e-10]"""
import argparse
import json
import math
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers.models.gemma4.modeling_gemma4 as modeling  # noqa: E402
from transformers import Gemma4ForCausalLM, Gemma4TextConfig  # noqa: E402

import gemma4_reference as reference  # noqa: E402
import tiny_gemma4_models as tiny  # noqa: E402


def build(name, directory, exact):
    c = Gemma4TextConfig(**{k: v for k, v in tiny.config_of(name).items() if k != "model_type"})
    c._attn_implementation = "eager"
    c._experts_implementation = "eager"
    model = Gemma4ForCausalLM(c).double().eval()
    weights = {k.replace("model.language_model.", "model."): torch.tensor(v, dtype=torch.float64)
               for k, v in tiny.random_weights(name).items()}
    _, unexpected = model.load_state_dict(weights, strict=False)
    m = reference.load_hf(directory)
    if exact:  # transformers' float32 constants, recomputed in float64
        inner = model.model
        inner.embed_tokens.embed_scale = torch.tensor(math.sqrt(c.hidden_size), dtype=torch.float64)
        if getattr(inner, "embed_tokens_per_layer", None) is not None:
            inner.embed_tokens_per_layer.embed_scale = torch.tensor(math.sqrt(c.hidden_size_per_layer_input),
                                                                    dtype=torch.float64)
        for layer_type in sorted(set(c.layer_types)):
            i = c.layer_types.index(layer_type)
            setattr(inner.rotary_emb, f"{layer_type}_inv_freq", torch.tensor(m.inv_freq(i), dtype=torch.float64))
    return model, m, unexpected


def float64_steps(on):
    """Patches (or restores) transformers' float32 steps."""
    if not hasattr(float64_steps, "saved"):
        float64_steps.saved = (modeling.Gemma4RMSNorm.forward, modeling.Gemma4TextRotaryEmbedding.forward,
                               modeling.nn.functional.softmax)
    norm, rope, softmax = float64_steps.saved
    if not on:
        modeling.Gemma4RMSNorm.forward, modeling.Gemma4TextRotaryEmbedding.forward = norm, rope
        modeling.nn.functional.softmax = softmax
        return

    def norm64(self, x):
        y = self._norm(x)
        return y * self.weight if self.with_scale else y

    def rope64(self, x, position_ids, layer_type):
        freqs = position_ids[..., None].double() * getattr(self, f"{layer_type}_inv_freq")
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def softmax64(x, dim=None, dtype=None, **kw):
        return softmax(x, dim=dim, dtype=None if x.dtype == torch.float64 else dtype, **kw)

    modeling.Gemma4RMSNorm.forward, modeling.Gemma4TextRotaryEmbedding.forward = norm64, rope64
    modeling.nn.functional.softmax = softmax64


def compare(model, m):
    worst = 0.0
    rng = np.random.default_rng(3)
    for n in (5, 13, 30):
        ids = rng.integers(3, 256, n).tolist()
        with torch.no_grad():
            out = model(torch.tensor([ids]), use_cache=False).logits[0].numpy()
        worst = max(worst, float(np.abs(out - reference.logits(m, reference.forward(m, ids, reference.Sequence(m)))).max()))
        with torch.no_grad():
            o = model(torch.tensor([ids[:-3]]), use_cache=True)
            cache = getattr(o, "cache", None) or o.past_key_values
            tail = []
            for t in ids[-3:]:
                o = model(torch.tensor([[t]]), cache=cache, use_cache=True)
                tail.append(o.logits[0, -1].numpy())
        seq = reference.Sequence(m)
        reference.forward(m, ids[:-3], seq)
        for t, want in zip(ids[-3:], tail):
            worst = max(worst, float(np.abs(reference.logits(m, reference.forward(m, [t], seq))[-1] - want).max()))
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(tiny.MODELS))
    parser.add_argument("--tolerance", type=float, default=1e-10)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="gemma4-check-")
    failed = False
    for name in args.models.split(","):
        directory = os.path.join(work, name)
        tiny.write_hf(directory, name, tiny.random_weights(name))
        for exact in (False, True):
            float64_steps(exact)
            model, m, unexpected = build(name, directory, exact)
            worst = compare(model, m)
            way = "float64" if exact else "as is"
            print(f"{name}: {way}: max |logit difference| {worst:.3e} (unused tensors: {len(unexpected)})")
            failed |= exact and worst > args.tolerance
    float64_steps(False)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
