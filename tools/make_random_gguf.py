#!/usr/bin/env python3
"""Seeded random-weight models for CPU speed comparisons with llama.cpp (tools/bench_vs_llama_cpp.py), in
two shapes (--shape):

- moe (the default): a mixture of experts with Qwen3-30B-A3B's proportions, about 0.5 GB in Q8_0.
  Qwen3-30B-A3B (48 layers, hidden 2048, 32 query / 4 KV heads of 128, 128 experts, top-8, expert width
  768 = 3/8 of hidden, norm_topk_prob, every layer sparse, untied head) cut to hidden 512, 8 / 1 heads of
  128, expert width 192 and 12 layers: 517M parameters, 61M of them active per token (Qwen3-30B-A3B: 11%,
  this: 12%).
- dense: a Llama with Llama 3.2 1B's widths (hidden 2048, 32 query / 8 KV heads of 64, FFN 8192, SwiGLU,
  rope theta 500,000) but an untied head, the vocabulary of the tokenizer given (SmolLM2's: 49,152) and
  12 layers (Llama 3.2 1B: 16): 60.8M parameters a layer, 0.93B in all, 0.99 GB in Q8_0. With --layers 24
  (1.66B parameters) Q4_K_M is about 1 GB.

The weights and the GGUF come from the tiny test models' writer (tests/e2e/tiny_models.py: llama.cpp's
tensor and key names, arch qwen3moe), the matrices in f16; the tokenizer keys are copied from a GGUF given
with --tokenizer-from (e.g. SmolLM2-135M-Instruct's: vocabulary 49,152), so both engines accept the file.

    tools/make_random_gguf.py OUT.gguf --tokenizer-from SmolLM2.gguf [--shape moe|dense] [--layers L]

Quantize with llama.cpp's llama-quantize (tools/llama_cpp/build.sh builds it). The files of the CPU
benchmark (docs/benchmarks/README.md), with M = SmolLM2-135M-Instruct.Q4_1.gguf:

    tools/make_random_gguf.py qwen3moe-proportions-f16.gguf --tokenizer-from M
    llama-quantize qwen3moe-proportions-f16.gguf qwen3moe-proportions-Q8_0.gguf Q8_0
    tools/make_random_gguf.py dense-1b-f16.gguf --tokenizer-from M --shape dense
    llama-quantize dense-1b-f16.gguf dense-1b-Q8_0.gguf Q8_0
    tools/make_random_gguf.py dense-1.7b-f16.gguf --tokenizer-from M --shape dense --layers 24
    llama-quantize dense-1.7b-f16.gguf dense-1.7b-Q4_K_M.gguf Q4_K_M

Q4_K_M leaves most matrices Q4_K and makes output.weight and, in about half of the layers (the first and
last eighth and every third between), attn_v and ffn_down Q6_K. The dense model in f16 takes about 4
bytes a parameter of memory while it is made (7 GB at 24 layers)."""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import tiny_models  # noqa: E402



def moe_spec(num_layers, vocab_size):
    """A row of tiny_models.MODELS' form: Qwen3-30B-A3B's config (examples/models/qwen3-30b-a3b.json) with
    its widths divided by 4 and its layer count cut."""
    return dict(family="qwen3_moe", moe=True, config=dict(
        model_type="qwen3_moe", hidden_size=512, intermediate_size=1536, num_attention_heads=8,
        num_key_value_heads=1, head_dim=128, num_hidden_layers=num_layers, num_experts=128,
        num_experts_per_tok=8, moe_intermediate_size=192, decoder_sparse_step=1, mlp_only_layers=[],
        norm_topk_prob=True, rope_theta=1000000.0, rms_norm_eps=1e-6, vocab_size=vocab_size,
        max_position_embeddings=4096, tie_word_embeddings=False, use_sliding_window=False))


def dense_spec(num_layers, vocab_size):
    """A row of tiny_models.MODELS' form: Llama 3.2 1B's widths with an untied head."""
    return dict(family="llama", config=dict(
        model_type="llama", hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, num_hidden_layers=num_layers, rope_theta=500000.0,
        rms_norm_eps=1e-5, vocab_size=vocab_size, max_position_embeddings=4096, tie_word_embeddings=False))


# --shape: (the seed's name, its spec, its default layer count)
SHAPES = {"moe": ("qwen3-30b-a3b-proportions", moe_spec, 12), "dense": ("llama-3.2-1b-proportions", dense_spec, 12)}


class ReadOnce(dict):
    """Tensors handed to the writer once each, then dropped, so that only the writer's copies stay."""
    __getitem__ = dict.pop


def tokenizer_of(path):
    """The tokenizer.* keys of the GGUF at path, and a writer callback that copies them."""
    import gguf
    fields = {k: f for k, f in gguf.GGUFReader(path).fields.items() if k.startswith("tokenizer.")}
    if "tokenizer.ggml.tokens" not in fields:
        sys.exit(f"error: {path} has no tokenizer.ggml.tokens")

    def write(writer):
        for key, f in fields.items():
            sub_type = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, f.contents(), f.types[0], sub_type=sub_type)
    return len(fields["tokenizer.ggml.tokens"].data), write


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the GGUF to write (f16 matrices, f32 norms)")
    ap.add_argument("--tokenizer-from", required=True, help="a GGUF whose tokenizer keys are copied")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="moe", help="the model's shape (default moe)")
    ap.add_argument("--layers", type=int, help="number of layers (default 12: moe about 0.5 GB, dense about "
                    "1 GB in Q8_0)")
    args = ap.parse_args()
    name, spec, default_layers = SHAPES[args.shape]
    layers = default_layers if args.layers is None else args.layers
    if layers < 1:
        sys.exit(f"error: --layers {layers}: must be at least 1")
    vocab, write_tokenizer = tokenizer_of(args.tokenizer_from)
    model = spec(layers, vocab)
    weights = tiny_models.random_weights(name, spec=model)
    num_params = sum(t.size for t in weights.values())
    for key, t in weights.items():  # the float32 matrices as f16 now, to halve the memory the writer adds
        if t.ndim > 1:
            weights[key] = t.astype(np.float16)
    tiny_models.write_gguf(args.out, name, ReadOnce(weights), spec=model, tokenizer=write_tokenizer,
                           matrix_dtype=np.float16)
    print(f"{args.out}: {num_params / 1e6:.0f}M parameters, {os.path.getsize(args.out) / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
