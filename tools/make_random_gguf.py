#!/usr/bin/env python3
"""A seeded random-weight mixture of experts with Qwen3-30B-A3B's proportions, about 0.5 GB in Q8_0, for
CPU speed comparisons with llama.cpp (tools/bench_vs_llama_cpp.py). Qwen3-30B-A3B (48 layers, hidden 2048,
32 query / 4 KV heads of 128, 128 experts, top-8, expert width 768 = 3/8 of hidden, norm_topk_prob,
every layer sparse, untied head) cut to hidden 512, 8 / 1 heads of 128, expert width 192 and 12 layers:
517M parameters, 61M of them active per token (Qwen3-30B-A3B: 11%, this: 12%).

The weights and the GGUF come from the tiny test models' writer (tests/e2e/tiny_models.py: llama.cpp's
tensor and key names, arch qwen3moe), the matrices in f16; the tokenizer keys are copied from a GGUF given
with --tokenizer-from (e.g. SmolLM2-135M-Instruct's: vocabulary 49,152), so both engines accept the file.

    tools/make_random_gguf.py OUT.gguf --tokenizer-from SmolLM2.gguf [--layers 12]

Quantize with llama.cpp's llama-quantize (tools/llama_cpp/build.sh builds it): `llama-quantize OUT.gguf
OUT-Q8_0.gguf Q8_0`."""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import tiny_models  # noqa: E402

NAME = "qwen3-30b-a3b-proportions"


def spec(num_layers, vocab_size):
    """A row of tiny_models.MODELS' form: Qwen3-30B-A3B's config (examples/models/qwen3-30b-a3b.json) with
    its widths divided by 4 and its layer count cut."""
    return dict(family="qwen3_moe", moe=True, config=dict(
        model_type="qwen3_moe", hidden_size=512, intermediate_size=1536, num_attention_heads=8,
        num_key_value_heads=1, head_dim=128, num_hidden_layers=num_layers, num_experts=128,
        num_experts_per_tok=8, moe_intermediate_size=192, decoder_sparse_step=1, mlp_only_layers=[],
        norm_topk_prob=True, rope_theta=1000000.0, rms_norm_eps=1e-6, vocab_size=vocab_size,
        max_position_embeddings=4096, tie_word_embeddings=False, use_sliding_window=False))


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
    ap.add_argument("--layers", type=int, default=12, help="number of layers (default 12: about 0.5 GB in Q8_0)")
    args = ap.parse_args()
    if args.layers < 1:
        sys.exit(f"error: --layers {args.layers}: must be at least 1")
    vocab, write_tokenizer = tokenizer_of(args.tokenizer_from)
    model = spec(args.layers, vocab)
    weights = tiny_models.random_weights(NAME, spec=model)
    tiny_models.write_gguf(args.out, NAME, weights, spec=model, tokenizer=write_tokenizer,
                           matrix_dtype=np.float16)
    num_params = sum(t.size for t in weights.values())
    print(f"{args.out}: {num_params / 1e6:.0f}M parameters, {os.path.getsize(args.out) / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
