#!/usr/bin/env python3
"""Seeded random Llama-shaped models written three ways from the same float weights, for comparing a
pre-quantized Hugging Face checkpoint with GGUFs on the CPU (docs/benchmarks/README.md):

- OUT/gptq-<bits>bit-g<group>[-asym]/: a GPTQ directory (v1 checkpoint_format, sym unless --asym) written
  with the e2e test's numpy quantizer (tests/e2e/prequantized_files.py), every Linear quantized, the tied
  embedding F16, norms F32, the tests' byte-level tokenizer.json;
- with --fp8, OUT/fp8-b128/: an FP8 directory (quant_method fp8, E4M3 weights with a weight_scale_inv per
  128x128 block, as Qwen3's and DeepSeek's FP8 releases), and OUT/q8_0.gguf of the same float weights;
- with --nvfp4, OUT/nvfp4/: a compressed-tensors nvfp4-pack-quantized directory (E2M1 codes two a byte, an
  F8_E4M3 scale per 16 inputs, a global scale per Linear: the e2e test's quantizer, prequantized_files.nvfp4);
- OUT/q4_0.gguf and, where every Linear's input width is a multiple of 256, OUT/q4_k.gguf: the same
  weights' Linears as Q4_0 (the gguf package's quantizer) and Q4_K (tiny_models.quantize_q4_k), the
  embedding F16 (tied, as in the GPTQ directory), the tokenizer keys of the GGUF given with --tokenizer-from
  (as tools/make_random_gguf.py), whose vocabulary the model takes.

Shapes (--shape): smollm2-135m (hidden 576, FFN 1536, 30 layers, 9 / 3 heads of 64) and llama-3.2-1b
(hidden 2048, FFN 8192, 16 layers, 32 / 8 heads of 64), both tied, with the tokenizer's vocabulary
(SmolLM2's: 49,152; Llama 3.2 1B's own is 128,256); the GPTQ directory's tokenizer.json is the tests'
byte-level one filled with placeholder tokens up to that vocabulary (`cbatch bench --dataset random` draws
prompt ids from the whole vocabulary).

    tools/make_prequantized_bench.py OUT --tokenizer-from SmolLM2.gguf --shape smollm2-135m --group 64
    tools/make_prequantized_bench.py OUT --tokenizer-from SmolLM2.gguf --shape llama-3.2-1b --group 128
    tools/make_prequantized_bench.py OUT --tokenizer-from SmolLM2.gguf --shape smollm2-135m --fp8
    tools/make_prequantized_bench.py OUT --tokenizer-from SmolLM2.gguf --shape smollm2-135m --group 64 --nvfp4
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models  # noqa: E402
from make_random_gguf import tokenizer_of  # noqa: E402
from prequantized_files import E4M3, NVFP4, gptq, nvfp4, write_safetensors  # noqa: E402

SHAPES = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, head_dim=64, vocab_size=49152, rope_theta=100000.0),
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=64, vocab_size=128256, rope_theta=500000.0),
}
LINEARS = (("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
           ("self_attn.o_proj", "attn_output"), ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"),
           ("mlp.down_proj", "ffn_down"))


def config_of(shape, vocab):
    c = dict(model_type="llama", architectures=["LlamaForCausalLM"], rms_norm_eps=1e-5,
             max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=tiny_models.BOS,
             eos_token_id=tiny_models.EOS, torch_dtype="float16", **SHAPES[shape])
    c["vocab_size"] = vocab
    return c


def rng_of(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def linear_shapes(c):
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    d, f = c["hidden_size"], c["intermediate_size"]
    return {"self_attn.q_proj": (q, d), "self_attn.k_proj": (kv, d), "self_attn.v_proj": (kv, d),
            "self_attn.o_proj": (d, q), "mlp.gate_proj": (f, d), "mlp.up_proj": (f, d), "mlp.down_proj": (d, f)}


def tensors(c):
    """(HF name, float32 tensor) one at a time, seeded by name."""
    yield "model.embed_tokens.weight", rng_of("embed").normal(0, 0.15, (c["vocab_size"], c["hidden_size"])).astype(np.float32)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for norm in ("input_layernorm", "post_attention_layernorm"):
            yield p + norm + ".weight", (1 + rng_of(p + norm).uniform(-0.4, 0.4, c["hidden_size"])).astype(np.float32)
        for lin, (out, inp) in linear_shapes(c).items():
            yield p + lin + ".weight", (rng_of(p + lin).uniform(-1, 1, (out, inp)) * np.sqrt(3.0 / inp)).astype(np.float32)
    yield "model.norm.weight", np.ones(c["hidden_size"], np.float32)


def gguf_name(name, c):
    if name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if name == "model.norm.weight":
        return "output_norm.weight"
    layer, rest = name[len("model.layers."):].split(".", 1)
    names = dict(LINEARS, input_layernorm="attn_norm", post_attention_layernorm="ffn_norm")
    return f"blk.{layer}.{names[rest[:-len('.weight')]]}.weight"


def fp8_blocks(w, block=128):
    """E4M3 codes of w / scale with a scale (max |block| / 448, f32) per block x block block, the nearest code
    found by bisection over the sorted finite values (the tests' quantizer compares with all 256)."""
    e4m3 = E4M3[:127]  # the non-negative finite codes 0..126, increasing
    out, inp = w.shape
    scales = np.zeros(((out + block - 1) // block, (inp + block - 1) // block), np.float32)
    codes = np.zeros(w.shape, np.uint8)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            b = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            s = np.float32(np.abs(b).max() / 448.0)
            a = np.abs(b / s)
            hi = np.clip(np.searchsorted(e4m3, a), 1, 126)
            nearest = np.where(a - e4m3[hi - 1] <= e4m3[hi] - a, hi - 1, hi)
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = nearest | np.where(b < 0, 0x80, 0)
            scales[i, j] = s
    return codes, scales


def write_all(out, shape, bits, group, sym, tokenizer_from, with_fp8, with_nvfp4):
    import gguf
    from gguf.quants import quantize
    vocab, write_tokenizer = tokenizer_of(tokenizer_from)
    c = config_of(shape, vocab)
    spec = dict(family="llama", config=c)
    with_q4_k = all(inp % 256 == 0 for _, inp in linear_shapes(c).values())
    writers = {"q4_0": gguf.GGUFWriter(os.path.join(out, "q4_0.gguf"), "llama")}
    if with_q4_k:
        writers["q4_k"] = gguf.GGUFWriter(os.path.join(out, "q4_k.gguf"), "llama")
    if with_fp8:
        writers["q8_0"] = gguf.GGUFWriter(os.path.join(out, "q8_0.gguf"), "llama")
    fp8_tensors, nvfp4_tensors = {}, {}
    for w in writers.values():
        tiny_models.write_gguf_metadata(w, spec, "llama", c, write_tokenizer)
    gptq_dir = os.path.join(out, f"gptq-{bits}bit-g{group}" + ("" if sym else "-asym"))
    os.makedirs(gptq_dir, exist_ok=True)
    hf, nrng = {}, np.random.default_rng(5)
    for name, t in tensors(c):
        lin = name.endswith("_proj.weight")
        if lin:
            if ".q_proj." in name or ".k_proj." in name:  # llama.cpp's rope layout in the GGUF
                heads = c["num_attention_heads"] if ".q_proj." in name else c["num_key_value_heads"]
                g = tiny_models.permute_for_adjacent_pairs(t, heads)
            else:
                g = t
            parts, _ = gptq(t, bits, sym, False, nrng, group=group)
            hf.update({name[:-len("weight")] + k: v for k, v in parts.items()})
            writers["q4_0"].add_tensor(gguf_name(name, c), quantize(g, gguf.GGMLQuantizationType.Q4_0),
                                       raw_dtype=gguf.GGMLQuantizationType.Q4_0)
            if with_q4_k:
                writers["q4_k"].add_tensor(gguf_name(name, c), tiny_models.quantize_q4_k(g),
                                           raw_dtype=gguf.GGMLQuantizationType.Q4_K)
            if with_fp8:
                writers["q8_0"].add_tensor(gguf_name(name, c), quantize(g, gguf.GGMLQuantizationType.Q8_0),
                                           raw_dtype=gguf.GGMLQuantizationType.Q8_0)
                codes, scales = fp8_blocks(t)
                fp8_tensors[name] = ("F8_E4M3", codes)
                fp8_tensors[name[:-len("weight")] + "weight_scale_inv"] = ("F32", scales)
            if with_nvfp4:
                parts, _ = nvfp4(t)
                nvfp4_tensors.update({name[:-len("weight")] + k: v for k, v in parts.items()})
        else:
            half = t.ndim == 2
            hf[name] = ("F16", t.astype("<f2")) if half else ("F32", t)
            fp8_tensors[name] = nvfp4_tensors[name] = hf[name]
            for w in writers.values():
                w.add_tensor(gguf_name(name, c), t.astype(np.float16) if half else t)
        print(name, flush=True)
    for w in writers.values():
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    write_safetensors(os.path.join(gptq_dir, "model.safetensors"), hf)
    config = dict(c, quantization_config=dict(quant_method="gptq", bits=bits, group_size=group, sym=sym,
                                              desc_act=False, checkpoint_format="gptq"))
    with open(os.path.join(gptq_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tokens = tiny_models.byte_tokens()  # the tests' byte-level vocabulary, filled up to the model's
    tokens += [f"<filler_{i}>" for i in range(len(tokens), vocab)]
    tiny_models.write_tokenizer(gptq_dir, tokens, {tiny_models.BOS: True, tiny_models.EOS: True}, ["Ġ t"])
    if with_fp8:
        fp8_dir = os.path.join(out, "fp8-b128")
        os.makedirs(fp8_dir, exist_ok=True)
        write_safetensors(os.path.join(fp8_dir, "model.safetensors"), fp8_tensors)
        config = dict(c, quantization_config=dict(quant_method="fp8", fmt="e4m3", activation_scheme="dynamic",
                                                  weight_block_size=[128, 128]))
        with open(os.path.join(fp8_dir, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
        tiny_models.write_tokenizer(fp8_dir, tokens, {tiny_models.BOS: True, tiny_models.EOS: True}, ["Ġ t"])
    if with_nvfp4:
        nvfp4_dir = os.path.join(out, "nvfp4")
        os.makedirs(nvfp4_dir, exist_ok=True)
        write_safetensors(os.path.join(nvfp4_dir, "model.safetensors"), nvfp4_tensors)
        with open(os.path.join(nvfp4_dir, "config.json"), "w") as f:
            json.dump(dict(c, quantization_config=NVFP4), f, indent=1)
        tiny_models.write_tokenizer(nvfp4_dir, tokens, {tiny_models.BOS: True, tiny_models.EOS: True}, ["Ġ t"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--tokenizer-from", required=True, help="a GGUF whose tokenizer keys are copied")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-135m")
    ap.add_argument("--bits", type=int, choices=(4, 8), default=4)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--asym", action="store_true", help="asymmetric GPTQ (zero points per group)")
    ap.add_argument("--fp8", action="store_true", help="also an FP8 directory (128x128 blocks) and a Q8_0 GGUF")
    ap.add_argument("--nvfp4", action="store_true", help="also a compressed-tensors NVFP4 directory")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_all(args.out, args.shape, args.bits, args.group, not args.asym, args.tokenizer_from, args.fp8, args.nvfp4)


if __name__ == "__main__":
    main()
