#!/usr/bin/env python3
"""Seeded random-weight models for CPU speed comparisons with llama.cpp (tools/bench_vs_llama_cpp.py), in
these shapes (--shape):

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

- the hybrids, each with its model's config.json sizes and full vocabulary (the tokenizer given is padded with
  <extra_N> tokens to it): qwen35-0.8b and qwen35-4b (Qwen3.5's dense models: three gated DeltaNet layers, then
  one of attention, 24 and 32 layers, tied heads), qwen35-35b-a3b (Qwen3.5-35B-A3B, 256 experts of width 512,
  top-8; 4 of its 40 layers by default: 4.4B parameters, 8.8 GB in f16), lfm2-1.2b (LFM2-1.2B: 10 short convs
  and 6 attention layers) and granite-4.0-h-micro (Granite-4.0-H-Micro: 36 Mamba-2 and 4 attention layers).
  --layers keeps the family's pattern (Qwen3.5: attention every fourth layer). Written by the tiny hybrid
  models' writer (tests/e2e/tiny_hybrid_models.py: the converter's layout), the matrices in f16.

The weights and the GGUF of the others come from the tiny test models' writer (tests/e2e/tiny_models.py: llama.cpp's
tensor and key names, arch qwen3moe), the matrices in f16; the tokenizer keys are copied from a GGUF given
with --tokenizer-from (e.g. SmolLM2-135M-Instruct's: vocabulary 49,152), so both engines accept the file.

    tools/make_random_gguf.py OUT.gguf --tokenizer-from SmolLM2.gguf [--shape SHAPE] [--layers L]

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
import tiny_hybrid_models  # noqa: E402
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


# The hybrid shapes: each model's config.json on the Hugging Face hub (the text model's, as the converter reads it),
# in tests/e2e/tiny_hybrid_models.py's MODELS form, whose layout code writes them.
QWEN35_LINEAR = dict(linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                     linear_num_key_heads=16, head_dim=256, rms_norm_eps=1e-6, attention_bias=False,
                     full_attention_interval=4, max_position_embeddings=262144,
                     rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                                          mrope_section=[11, 11, 10], mrope_interleaved=True))


def qwen35_layer_types(num_layers):
    """Three gated DeltaNet layers, then one of full attention (full_attention_interval 4)."""
    return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(num_layers)]


def qwen35_spec(hidden, heads, kv_heads, v_heads, width, tied):
    def spec(num_layers, vocab_size):
        return dict(family="qwen3_5", layout="multimodal", config=dict(
            QWEN35_LINEAR, model_type="qwen3_5_text", hidden_size=hidden, num_attention_heads=heads,
            num_key_value_heads=kv_heads, linear_num_value_heads=v_heads, intermediate_size=width,
            num_hidden_layers=num_layers, layer_types=qwen35_layer_types(num_layers), vocab_size=vocab_size,
            tie_word_embeddings=tied))
    return spec


def qwen35_moe_spec(num_layers, vocab_size):
    """Qwen3.5-35B-A3B: 40 layers, hidden 2048, 16 / 2 heads of 256, DeltaNet 16 key / 32 value heads of 128,
    256 experts of width 512, top-8, a shared expert of width 512, untied head."""
    return dict(family="qwen3_5_moe", layout="multimodal", config=dict(
        QWEN35_LINEAR, model_type="qwen3_5_moe_text", hidden_size=2048, num_attention_heads=16,
        num_key_value_heads=2, linear_num_value_heads=32, num_experts=256, num_experts_per_tok=8,
        moe_intermediate_size=512, shared_expert_intermediate_size=512, num_hidden_layers=num_layers,
        layer_types=qwen35_layer_types(num_layers), vocab_size=vocab_size, tie_word_embeddings=False))


def lfm2_spec(num_layers, vocab_size):
    """LFM2-1.2B: 16 layers (attention at 2, 5, 8, 10, 12, 14, short convs of 3 taps elsewhere), hidden 2048,
    32 / 8 heads of 64, feed-forward 12288 auto-adjusted to 8192, tied head."""
    full = [2, 5, 8, 10, 12, 14]
    return dict(family="lfm2", config=dict(
        model_type="lfm2", architectures=["Lfm2ForCausalLM"], hidden_size=2048, num_hidden_layers=num_layers,
        num_attention_heads=32, num_key_value_heads=8, intermediate_size=12288, block_auto_adjust_ff_dim=True,
        block_ffn_dim_multiplier=1.0, block_multiple_of=256, conv_L_cache=3, conv_bias=False, norm_eps=1e-5,
        max_position_embeddings=128000, tie_word_embeddings=True, vocab_size=vocab_size,
        layer_types=["full_attention" if i in full else "conv" for i in range(num_layers)],
        full_attn_idxs=[i for i in full if i < num_layers],
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0)))


def granite_micro_spec(num_layers, vocab_size):
    """Granite-4.0-H-Micro: 40 layers, 4 of them attention (32 / 8 heads of 64, no RoPE), the others Mamba-2 (64
    heads of 64, state 128, 1 group, 4 conv taps), hidden 2048, a dense shared MLP of width 8192, tied head."""
    attention = {i for i in range(num_layers) if i % 10 == 9}
    return dict(family="granitemoehybrid", config=dict(
        model_type="granitemoehybrid", architectures=["GraniteMoeHybridForCausalLM"], hidden_size=2048,
        num_hidden_layers=num_layers,
        layer_types=["attention" if i in attention else "mamba" for i in range(num_layers)],
        num_attention_heads=32, num_key_value_heads=8, intermediate_size=8192, shared_intermediate_size=8192,
        num_local_experts=0, num_experts_per_tok=0, mamba_n_heads=64, mamba_d_head=64, mamba_d_state=128,
        mamba_n_groups=1, mamba_d_conv=4, mamba_expand=2, mamba_conv_bias=True, mamba_proj_bias=False,
        mamba_chunk_size=256, position_embedding_type="nope", embedding_multiplier=12.0, residual_multiplier=0.22,
        attention_multiplier=0.0078125, logits_scaling=8.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
        max_position_embeddings=131072, vocab_size=vocab_size,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0)))


# --shape: (the seed's name, its spec, its default layer count, the hybrid's real vocabulary or None)
SHAPES = {"moe": ("qwen3-30b-a3b-proportions", moe_spec, 12, None),
          "dense": ("llama-3.2-1b-proportions", dense_spec, 12, None),
          "qwen3-30b-a3b": ("qwen3-30b-a3b", None, 48, None), "gpt-oss-20b": ("gpt-oss-20b", None, 24, None),
          "qwen35-0.8b": ("qwen3.5-0.8b", qwen35_spec(1024, 8, 2, 16, 3584, True), 24, 248320),
          "qwen35-4b": ("qwen3.5-4b", qwen35_spec(2560, 16, 4, 32, 9216, True), 32, 248320),
          "qwen35-35b-a3b": ("qwen3.5-35b-a3b", qwen35_moe_spec, 4, 248320),
          "lfm2-1.2b": ("lfm2-1.2b", lfm2_spec, 16, 65536),
          "granite-4.0-h-micro": ("granite-4.0-h-micro", granite_micro_spec, 40, 100352)}


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


PER_TOKEN = {"tokenizer.ggml.tokens": lambda i: f"<extra_{i}>", "tokenizer.ggml.token_type": lambda i: 1,
             "tokenizer.ggml.scores": lambda i: 0.0}


def tokenizer_of(path, vocab=None):
    """The tokenizer.* keys of the GGUF at path, and a writer callback that copies them; with vocab, the
    per-token arrays padded to vocab entries with normal tokens <extra_N> (a real shape's embedding and head)."""
    import gguf
    fields = {k: f for k, f in gguf.GGUFReader(path).fields.items() if k.startswith("tokenizer.")}
    if "tokenizer.ggml.tokens" not in fields:
        sys.exit(f"error: {path} has no tokenizer.ggml.tokens")
    size = len(fields["tokenizer.ggml.tokens"].data)
    if vocab is not None and vocab < size:
        sys.exit(f"error: {path} has {size} tokens, more than the shape's vocabulary of {vocab}")

    def write(writer):
        for key, f in fields.items():
            sub_type = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
            value = f.contents()
            if vocab is not None and key in PER_TOKEN:
                value = list(value) + [PER_TOKEN[key](i) for i in range(vocab - size)]
            writer.add_key_value(key, value, f.types[0], sub_type=sub_type)
    return (size if vocab is None else vocab), write


class Consumed(dict):
    """Tensors iterated once each and dropped as they are (the hybrid writer's converted copies stay)."""

    def items(self):
        while self:
            key = next(iter(self))
            yield key, self.pop(key)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the GGUF to write (f16 matrices, f32 norms; qwen3-30b-a3b: Q4_K_M's types)")
    ap.add_argument("--tokenizer-from", required=True, help="a GGUF whose tokenizer keys are copied")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="moe", help="the model's shape (default moe)")
    ap.add_argument("--layers", type=int, help="number of layers (default 12: moe about 0.5 GB, dense about "
                    "1 GB in Q8_0; qwen3-30b-a3b: 48; a hybrid: its model's, qwen35-35b-a3b: 4)")
    args = ap.parse_args()
    name, spec, default_layers, real_vocab = SHAPES[args.shape]
    layers = default_layers if args.layers is None else args.layers
    if layers < 1:
        sys.exit(f"error: --layers {layers}: must be at least 1")
    vocab, write_tokenizer = tokenizer_of(args.tokenizer_from, real_vocab)
    if real_vocab is not None:  # a hybrid: tests/e2e/tiny_hybrid_models.py's layout, f16 matrices
        model = spec(layers, vocab)
        weights = tiny_hybrid_models.random_weights(name, spec=model, matrix_dtype=np.float16)
        num_params = sum(t.size for t in weights.values())
        tiny_hybrid_models.write_gguf(args.out, name, Consumed(weights), spec=model, tokenizer=write_tokenizer)
        print(f"{args.out}: {num_params / 1e9:.2f}B parameters, {os.path.getsize(args.out) / 1e9:.2f} GB")
        return
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
