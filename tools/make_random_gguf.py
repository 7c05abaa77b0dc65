#!/usr/bin/env python3
"""Seeded random-weight models for CPU speed comparisons with llama.cpp (tools/bench_vs_llama_cpp.py), in
four shapes (--shape):

- moe (the default): a mixture of experts with Qwen3-30B-A3B's proportions, about 0.5 GB in Q8_0.
  Qwen3-30B-A3B (48 layers, hidden 2048, 32 query / 4 KV heads of 128, 128 experts, top-8, expert width
  768 = 3/8 of hidden, norm_topk_prob, every layer sparse, untied head) cut to hidden 512, 8 / 1 heads of
  128, expert width 192 and 12 layers: 517M parameters, 61M of them active per token (Qwen3-30B-A3B: 11%,
  this: 12%).
- dense: a Llama with Llama 3.2 1B's widths (hidden 2048, 32 query / 8 KV heads of 64, FFN 8192, SwiGLU,
  rope theta 500,000) but an untied head, the vocabulary of the tokenizer given (SmolLM2's: 49,152) and
  12 layers (Llama 3.2 1B: 16): 60.8M parameters a layer, 0.93B in all, 0.99 GB in Q8_0. With --layers 24
  (1.66B parameters) Q4_K_M is about 1 GB.
- qwen3-30b-a3b: Qwen3-30B-A3B's own shape (examples/models/qwen3-30b-a3b.json, 48 layers, 30.2B
  parameters with SmolLM2's vocabulary) written straight in Q4_K_M's types with random codes (no f16 file:
  that would take 61 GB): Q4_K matrices, Q6_K output.weight and attn_v / ffn_down_exps on llama.cpp's
  Q4_K_M layers, f32 norms and routers. About 18 GB, written one tensor at a time (under 1 GB of memory).
  For the memory and speed of a full-size mixture of experts; llama-quantize is not needed.
- gpt-oss-20b: gpt-oss-20b's own shape (examples/models/gpt-oss-20b.json: 24 layers, hidden 2880, 64 / 8
  heads of 64 with sinks and biases, 32 experts of width 2880, top-4, windows of 128 on even layers) as
  ggml-org ships it, MXFP4 experts and Q8_0 for the other matrices, random codes likewise: 20.0B parameters
  with SmolLM2's vocabulary, about 11 GB.

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
import json
import os
import sys
import zlib

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
SHAPES = {"moe": ("qwen3-30b-a3b-proportions", moe_spec, 12), "dense": ("llama-3.2-1b-proportions", dense_spec, 12),
          "qwen3-30b-a3b": ("qwen3-30b-a3b", None, 48), "gpt-oss-20b": ("gpt-oss-20b", None, 24)}


def example_spec(name, family, num_layers, vocab_size):
    """The config examples/models/NAME.json with the tokenizer's vocabulary and num_layers layers."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "models",
                           name + ".json")) as f:
        config = json.load(f)
    config.update(num_hidden_layers=num_layers, vocab_size=vocab_size, max_position_embeddings=4096)
    if "layer_types" in config:
        config["layer_types"] = config["layer_types"][:num_layers]
    return dict(family=family, moe=True, config=config)


def more_bits(layer, num_layers):
    """Whether llama-quantize's Q4_K_M gives this layer's attn_v and ffn_down Q6_K (its use_more_bits)."""
    return layer < num_layers // 8 or layer >= 7 * num_layers // 8 or (layer - num_layers // 8) % 3 == 2


def random_blocks(rng, rows, cols, qtype, std):
    """(rows, cols) weights as random blocks of qtype (Q4_K, Q6_K, Q8_0 or MXFP4), uint8 (rows, cols / block
    elements * block bytes): random codes and sub-block scales under one scale per tensor chosen for about
    `std` and mean 0."""
    import gguf
    T = gguf.GGMLQuantizationType
    elems, size = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, (rows * cols // elems, size), dtype=np.uint8)

    def f16(x):
        return np.frombuffer(np.float16(x).tobytes(), np.uint8)
    if qtype == T.Q4_K:  # d, dmin, 12 bytes of 6-bit sc and m, 128 bytes of nibbles
        d = std / 258.0  # x = d sc q - dmin m: sd about 258 d for uniform codes, mean 0 when dmin = 7.5 d
        b[:, 0:2], b[:, 2:4] = f16(d), f16(7.5 * d)
    elif qtype == T.Q6_K:  # 128 bytes of low nibbles, 64 of high bits, 16 int8 sc, d: x = d sc (q - 32)
        b[:, 208:210] = f16(std / 1367.0)
    elif qtype == T.Q8_0:  # d, 32 int8: sd 73.9 d
        b[:, 0:2] = f16(std / 73.9)
    elif qtype == T.MXFP4:  # E8M0 e, 16 bytes of E2M1 nibbles: x = 2^(e - 128) * doubled E2M1, sd 5.85 2^(e - 128)
        b[:, 0] = np.uint8(128 + round(np.log2(std / 5.85)))
    else:
        raise ValueError(f"no random blocks of {qtype.name}")
    return b.reshape(rows, -1)


def full_shape_tensors(name, c, rng):
    """(GGUF name, shape, make(), type or None for f32) of each tensor of a full-size shape, in file order:
    gpt-oss-20b as ggml-org ships it (MXFP4 experts, Q8_0 for the other matrices), Qwen3-30B-A3B as Q4_K_M."""
    import gguf
    T = gguf.GGMLQuantizationType
    dim, hd, vocab, layers = c["hidden_size"], c["head_dim"], c["vocab_size"], c["num_hidden_layers"]
    q_dim, kv_dim = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    experts = tiny_models.num_experts(c)
    width = c.get("moe_intermediate_size", c["intermediate_size"])
    gpt_oss = name == "gpt-oss-20b"

    def f32(gguf_name, shape, lo, hi):
        return gguf_name, shape, lambda: rng.uniform(lo, hi, shape).astype(np.float32), None

    def blocks(gguf_name, shape, qtype, std=None):  # shape (..., rows, cols); std 1 / sqrt(cols) as tiny_models
        rows, sd = int(np.prod(shape[:-1])), 1.0 / np.sqrt(shape[-1]) if std is None else std
        return gguf_name, shape, lambda: random_blocks(rng, rows, shape[-1], qtype, sd).reshape(shape[:-1] + (-1,)), qtype

    main, head = (T.Q8_0, T.Q8_0) if gpt_oss else (T.Q4_K, T.Q6_K)
    router = np.sqrt(3.0 / dim) * tiny_models.ROUTER_SCALE  # uniform(-router, router), as tiny_models' routers
    tensors = [blocks("token_embd.weight", (vocab, dim), main, std=1.0)]
    for i in range(layers):
        b = f"blk.{i}."
        wide = main if gpt_oss or not more_bits(i, layers) else T.Q6_K
        tensors += [f32(b + "attn_norm.weight", (dim,), 0.6, 1.4),
                    blocks(b + "attn_q.weight", (q_dim, dim), main),
                    blocks(b + "attn_k.weight", (kv_dim, dim), main),
                    blocks(b + "attn_v.weight", (kv_dim, dim), wide),
                    blocks(b + "attn_output.weight", (dim, q_dim), main)]
        if gpt_oss:
            tensors += [f32(b + f"attn_{x}.bias", (n,), -0.1, 0.1)
                        for x, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim), ("output", dim))]
            tensors += [f32(b + "attn_sinks.weight", (c["num_attention_heads"],), 0.5, 3.0),
                        f32(b + "post_attention_norm.weight", (dim,), 0.6, 1.4),
                        f32(b + "ffn_gate_inp.bias", (experts,), -1.0, 1.0)]
        else:
            tensors += [f32(b + "attn_q_norm.weight", (hd,), 0.6, 1.4), f32(b + "attn_k_norm.weight", (hd,), 0.6, 1.4),
                        f32(b + "ffn_norm.weight", (dim,), 0.6, 1.4)]
        tensors += [f32(b + "ffn_gate_inp.weight", (experts, dim), -router, router),
                    blocks(b + "ffn_gate_exps.weight", (experts, width, dim), T.MXFP4 if gpt_oss else T.Q4_K),
                    blocks(b + "ffn_up_exps.weight", (experts, width, dim), T.MXFP4 if gpt_oss else T.Q4_K),
                    blocks(b + "ffn_down_exps.weight", (experts, dim, width), T.MXFP4 if gpt_oss else wide)]
        if gpt_oss:
            tensors += [f32(b + f"ffn_{x}_exps.bias", (experts, n), -0.1, 0.1)
                        for x, n in (("gate", width), ("up", width), ("down", dim))]
    return tensors + [f32("output_norm.weight", (dim,), 0.6, 1.4), blocks("output.weight", (vocab, dim), head)]


def write_full_shape(path, name, family, layers, vocab, write_tokenizer):
    """A full-size shape, one tensor at a time (gguf's streaming writer: every tensor's info first)."""
    import gguf
    spec = example_spec(name, family, layers, vocab)
    c = tiny_models.config_of(name, spec)
    arch = tiny_models.GGUF_ARCH[family]
    tensors = full_shape_tensors(name, c, np.random.default_rng(zlib.crc32(name.encode())))
    writer = gguf.GGUFWriter(path, arch)
    tiny_models.write_gguf_metadata(writer, spec, arch, c, write_tokenizer)
    num_params = 0
    for tname, shape, _, qtype in tensors:
        num_params += int(np.prod(shape))
        if qtype is None:
            writer.add_tensor_info(tname, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            elems, size = gguf.GGML_QUANT_SIZES[qtype]
            byte_shape = shape[:-1] + (shape[-1] // elems * size,)
            writer.add_tensor_info(tname, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, _, make, _ in tensors:
        writer.write_tensor_data(make())
    writer.close()
    return num_params


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
    ap.add_argument("out", help="the GGUF to write (f16 matrices, f32 norms; qwen3-30b-a3b: Q4_K_M's types)")
    ap.add_argument("--tokenizer-from", required=True, help="a GGUF whose tokenizer keys are copied")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="moe", help="the model's shape (default moe)")
    ap.add_argument("--layers", type=int, help="number of layers (default 12: moe about 0.5 GB, dense about "
                    "1 GB in Q8_0; qwen3-30b-a3b: 48)")
    args = ap.parse_args()
    name, spec, default_layers = SHAPES[args.shape]
    layers = default_layers if args.layers is None else args.layers
    if layers < 1:
        sys.exit(f"error: --layers {layers}: must be at least 1")
    vocab, write_tokenizer = tokenizer_of(args.tokenizer_from)
    if spec is None:
        family = "gpt_oss" if name == "gpt-oss-20b" else "qwen3_moe"
        num_params = write_full_shape(args.out, name, family, layers, vocab, write_tokenizer)
        print(f"{args.out}: {num_params / 1e9:.2f}B parameters, {os.path.getsize(args.out) / 1e9:.2f} GB")
        return
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
