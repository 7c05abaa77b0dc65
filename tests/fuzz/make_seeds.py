#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/ (run it again after changing it;
the files are committed): JSONL prompt files, tokenizer texts, tiny valid model files (GGUF with F32 and
F16 weights, a llama2.c checkpoint), llama2.c tokenizer.bin files, ShareGPT bench files, and regexes,
GBNF grammars and JSON schemas for the constraint compilers (counted forms at and past their limits). The models are
1 layer, dim 8, vocab 8, context 16, with weights from a fixed generator, a few KB each.

model_seeds() adds a tiny model of every family (model_file: GGUF; hf_directory: config.json and
model.safetensors, framed as that target reads them), LoRA adapters for four of them (lora_adapter: lora_seeds) and
the fixed tokenizer of hf_directory (hf_tokenizer/), written
by the e2e tests' own writers (tests/e2e/tiny_*models.py, prequantized_files.py; they need numpy and the gguf
package) at shrunken sizes: dim 16 or 32, one or two layers of each kind, the 300-token byte-level vocabulary,
under 128 KB each (run_fuzzers.sh's -max_len for these targets)."""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SPACE = "\u2581"
PIECES = ["<unk>", "<s>", "</s>", SPACE, "a", "b", SPACE + "a", "ab"]
TYPES = [2, 3, 3, 1, 1, 1, 1, 1]
DIM, HIDDEN, HEADS, KV_HEADS, VOCAB, CONTEXT = 8, 16, 2, 1, 8, 16
HEAD = DIM // HEADS
rng = random.Random(0)


def floats(n):
    return [rng.uniform(-0.5, 0.5) for _ in range(n)]


def write(target, name, data):
    os.makedirs(os.path.join(HERE, "corpus", target), exist_ok=True)
    with open(os.path.join(HERE, "corpus", target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, type_id, payload):
    return gguf_string(key) + struct.pack("<I", type_id) + payload


def gguf_array(key, elem_type, items):
    return gguf_kv(key, 9, struct.pack("<IQ", elem_type, len(items)) + b"".join(items))


# (name, ggml dims with ne[0] = columns)
LLAMA_TENSORS = [("token_embd.weight", [DIM, VOCAB]), ("blk.0.attn_norm.weight", [DIM]),
                 ("blk.0.attn_q.weight", [DIM, DIM]), ("blk.0.attn_k.weight", [DIM, KV_HEADS * HEAD]),
                 ("blk.0.attn_v.weight", [DIM, KV_HEADS * HEAD]), ("blk.0.attn_output.weight", [DIM, DIM]),
                 ("blk.0.ffn_norm.weight", [DIM]), ("blk.0.ffn_gate.weight", [DIM, HIDDEN]),
                 ("blk.0.ffn_up.weight", [DIM, HIDDEN]), ("blk.0.ffn_down.weight", [HIDDEN, DIM]),
                 ("output_norm.weight", [DIM]), ("output.weight", [DIM, VOCAB])]


def gguf_model(f16, tied):
    kvs = [gguf_kv("general.architecture", 8, gguf_string("llama")),
           gguf_kv("llama.embedding_length", 4, struct.pack("<I", DIM)),
           gguf_kv("llama.feed_forward_length", 4, struct.pack("<I", HIDDEN)),
           gguf_kv("llama.block_count", 4, struct.pack("<I", 1)),
           gguf_kv("llama.attention.head_count", 4, struct.pack("<I", HEADS)),
           gguf_kv("llama.attention.head_count_kv", 4, struct.pack("<I", KV_HEADS)),
           gguf_kv("llama.context_length", 4, struct.pack("<I", CONTEXT)),
           gguf_kv("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
           gguf_kv("tokenizer.ggml.model", 8, gguf_string("llama")),
           gguf_array("tokenizer.ggml.tokens", 8, [gguf_string(p) for p in PIECES]),
           gguf_array("tokenizer.ggml.scores", 6, [struct.pack("<f", -i) for i in range(VOCAB)]),
           gguf_array("tokenizer.ggml.token_type", 5, [struct.pack("<i", t) for t in TYPES]),
           gguf_kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
           gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2))]
    tensors = [t for t in LLAMA_TENSORS if not (tied and t[0] == "output.weight")]
    infos, data = b"", b""
    for name, dims in tensors:
        n = 1
        for d in dims:
            n *= d
        is_f16 = f16 and len(dims) == 2
        blob = struct.pack(f"<{n}e" if is_f16 else f"<{n}f", *floats(n))
        infos += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", 1 if is_f16 else 0, len(data))
        data += blob + b"\0" * (-len(blob) % 32)
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    return header + b"\0" * (-len(header) % 32) + data


def llama2c_model():
    header = struct.pack("<7i", DIM, HIDDEN, 1, HEADS, KV_HEADS, VOCAB, CONTEXT)
    kv = KV_HEADS * HEAD
    n = (VOCAB * DIM + DIM + DIM * DIM + 2 * kv * DIM + DIM * DIM + DIM + 3 * HIDDEN * DIM + DIM
         + CONTEXT * HEAD)
    return header + struct.pack(f"<{n}f", *floats(n))


def tokenizer_bin(pieces):
    out = struct.pack("<i", max(len(p.encode()) for p in pieces))
    for i, p in enumerate(pieces):
        b = p.encode()
        out += struct.pack("<fi", -float(i), len(b)) + b
    return out


def main():
    write("model_file", "tiny-f32.gguf", gguf_model(f16=False, tied=False))
    write("model_file", "tiny-f16-tied.gguf", gguf_model(f16=True, tied=True))
    write("model_file", "tiny.bin", llama2c_model())
    plain = ["<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", " a", "ab"]
    write("tokenizer_bin", "tok8.bin", tokenizer_bin(plain))
    write("tokenizer_bin", "tok-bytes.bin", tokenizer_bin(plain + [f"<0x{b:02X}>" for b in range(256)]))
    lines = [{"id": "q1", "prompt": "I dreamed of", "max_tokens": 4, "temperature": 0, "stop": ["\n"]},
             {"id": 7, "prompt_token_ids": [1, 72, 301], "top_p": 0.9, "top_k": 5, "seed": 3},
             {"id": "c", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
             {"custom_id": "r1", "method": "POST", "url": "/v1/completions",
              "body": {"model": "m", "prompt": "x", "max_completion_tokens": 2, "stop": None}},
             {"custom_id": "r2", "method": "POST", "url": "/v1/chat/completions",
              "body": {"messages": [{"role": "user", "content": "Name three colors."}]}}]
    write("request_parser", "valid.jsonl", "".join(json.dumps(l) + "\n" for l in lines))
    write("request_parser", "mixed.jsonl", b"\xef\xbb\xbf" + json.dumps(lines[0]).encode() + b"\r\n\n{bad\n"
          + b'{"id": "u", "prompt": "\xff"}\n{"id": [1], "max_tokens": -1, "prompt": "x"}\n{"prompt": "torn')
    write("request_parser", "escapes.jsonl", '{"id": "q\\u0031\\t\\"", "prompt": "\\ud83d\\ude00 \\u0000"}\n')
    write("request_parser", "structured.jsonl", "".join(json.dumps(l) + "\n" for l in [
        {"id": "g", "prompt": "x", "structured_outputs": {"grammar": 'root ::= "[" (v ("," v)*)? "]"\nv ::= [0-9]+ | root'}},
        {"id": "s", "prompt": "x", "guided_json": {"$defs": {"n": {"type": "object", "properties": {
            "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}, "v": {"type": "integer", "minimum": -3, "maximum": 70}}}},
            "$ref": "#/$defs/n"}},
        {"id": "r", "prompt": "x", "guided_regex": "(a|b)*c{2,4}", "response_format": {"type": "json_object"}}]))
    write("request_parser", "hardening.jsonl",
          '{"id": "b", "prompt": "x", "logit_bias": {"5": 100, "07": -100.0, "x": 1}, "best_of": 2}\n'
          '{"id": "n", "prompt": "x", "seed": 18446744073709551616, "t": [1, -9223372036854775809, 1e999, 01]}\n'
          '{"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": {"model": "P", '
          '"input": ["a", "b"], "dimensions": 2147483648, "truncate_prompt_tokens": 1}}\n'
          '{"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": ["a", "b"], "n": 60000}}\n')
    counted = [{"id": "c1", "prompt": "x", "structured_outputs": {"regex": "a{1000000}"}},
               {"id": "c2", "prompt": "x", "structured_outputs": {"regex": "a{,3}b{2,}c{1000}x{}y{ 1}z{1,2"}},
               {"id": "c3", "prompt": "x", "guided_regex": "a{99999999999999999999}|{1}|a**|a*+|[\\d-a]"},
               {"id": "c4", "prompt": "x", "structured_outputs": {"grammar": 'root ::= "a"{1000000} | "b"{,3} | [a]{2,1}'}},
               {"id": "c5", "prompt": "x", "guided_json": {"type": "array", "items": {"type": "string", "maxLength": 1e30},
                                                         "minItems": 3.0, "maxItems": 18446744073709551615}},
               {"id": "c6", "prompt": "x", "guided_json": {"type": "string", "pattern": "^a{0,1000}\\$$", "minLength": "2"}}]
    write("request_parser", "structured-counts.jsonl", "".join(json.dumps(l) + "\n" for l in counted))
    for name, text in [("counts.re", "a{3}b{2,}c{,4}d{,}e{2,5}?(?:fg){1000}h{}i{a}j{ 1}k{1,2"),
                       ("huge-count.re", "x{1000000}|y{99999999999999999999}|z{1001,}"),
                       ("classes.re", "^[^\\d\\s]\\w+[]a-c-]\\.\\x41\\u00e9\\é+(a|b|)*?.{2}$"),
                       ("rules.re", "\\{(?&1)(,(?&1))*\\}\n[0-9]{1,3}|(?&0)"),
                       ("grammar.gbnf", 'root ::= item{1,3} ("," item){0,}\nitem ::= [a-z\\u00e9]{2} | "\\x41"? num\n'
                                        'num ::= [0-9]{1000} | [0-9]{ 2 , }  # comment\n'),
                       ("huge-count.gbnf", 'root ::= "a"{1000000} | "b"{99999999999999999999,}'),
                       ("schema.json", json.dumps({"type": "object", "properties": {
                           "s": {"type": "string", "minLength": 2, "maxLength": 1000},
                           "p": {"type": "string", "pattern": "^[a-z]{1,4}$"},
                           "a": {"type": "array", "prefixItems": [{"type": "integer", "minimum": -5, "maximum": 500}],
                                 "items": {"type": "boolean"}, "minItems": 1, "maxItems": 100}}, "required": ["s"]})),
                       ("schema-counts.json", '{"type": "string", "maxLength": 1e30, "minLength": 3.5}')]:
        write("constraint", name, text)
    write("tokenizer", "ascii.txt", "I dreamed of a quiet city where the robots sang")
    write("tokenizer", "unicode.txt", "  caf\u00e9 \u65e5\u672c\u8a9e \U0001F600\ttabs\nnewline ")
    write("tokenizer", "bytes.bin", b"\xff\xfe\x00 a\xc3")
    turn = lambda who, text: {"from": who, "value": text}
    write("sharegpt", "two.json", json.dumps([
        {"id": "a", "conversations": [turn("human", "What is 2 + 2? Say why."), turn("gpt", "4, as 2 + 2 = 4."),
                                      turn("human", "thanks")]},
        {"id": "b", "conversations": [turn("human", "hi")]}, {"id": "c"},
        {"conversations": [turn("human", "caf\u00e9 \U0001F600 \"q\"\n"), turn("gpt", "x" * 70)], "id": "d"}]))
    write("sharegpt", "odd.json", '[{"conversations": [{"value": 1}, {"value": "\\ud800"}]}, 5, '
                                  '{"conversations": "x"}, {"conversations": [[], {}]}] ')
    model_seeds()


# Each family's config changes for its seed: everything small, every layer kind kept.
SMALL = dict(hidden_size=16, intermediate_size=16, num_attention_heads=2, num_key_value_heads=1, head_dim=8)
DENSE_SEEDS = {"llama": {}, "qwen2": {}, "gemma2": dict(num_hidden_layers=2),
               "gemma3": dict(num_hidden_layers=2, sliding_window_pattern=2), "phi3": {},
               "smollm3": dict(num_hidden_layers=2, no_rope_layers=[1, 0]),
               "qwen3-moe": dict(num_experts=4, moe_intermediate_size=8, mlp_only_layers=[1], num_hidden_layers=2),
               "qwen2-moe": dict(num_experts=4, moe_intermediate_size=8, shared_expert_intermediate_size=8,
                                 num_hidden_layers=1),
               "mixtral": dict(num_local_experts=2, num_hidden_layers=1), "olmoe": dict(num_experts=4, num_hidden_layers=1)}
LINEAR_SMALL = dict(SMALL, linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=1,
                    linear_num_value_heads=2, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"])
HYBRID_SEEDS = {
    "qwen3_5": LINEAR_SMALL,
    "qwen3_5_moe": dict(LINEAR_SMALL, num_experts=4, moe_intermediate_size=8, shared_expert_intermediate_size=8),
    "qwen3_next": dict(LINEAR_SMALL, num_experts=4, moe_intermediate_size=8, shared_expert_intermediate_size=8),
    "lfm2": dict(SMALL, intermediate_size=24, block_multiple_of=8, num_hidden_layers=2,
                 layer_types=["conv", "full_attention"], full_attn_idxs=[1]),
    "granite_h": dict(SMALL, shared_intermediate_size=16, num_hidden_layers=2, layer_types=["mamba", "attention"],
                      mamba_n_heads=2, mamba_d_head=16, mamba_d_state=8, mamba_n_groups=1),
    "granite_h_moe": dict(SMALL, intermediate_size=8, num_local_experts=4, num_hidden_layers=2,
                          layer_types=["linear_attention", "full_attention"], mamba_n_heads=2, mamba_d_head=16,
                          mamba_d_state=8),
    "nemotron_h": dict(SMALL, hybrid_override_pattern="M*-", num_hidden_layers=3, mamba_num_heads=2,
                       mamba_head_dim=16, ssm_state_size=8, n_groups=1)}


def framed(directory):
    """An HF directory as hf_directory reads it: the config's length (2 bytes), config.json, model.safetensors."""
    config = open(os.path.join(directory, "config.json"), "rb").read()
    return struct.pack("<H", len(config)) + config + open(os.path.join(directory, "model.safetensors"), "rb").read()


def model_seeds():
    import shutil
    import sys
    import tempfile
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    import numpy as np
    import prequantized_files as pq
    import tiny_gemma4_models as g4
    import tiny_hybrid_models as th
    import tiny_models as tm
    work = tempfile.mkdtemp()
    gguf_path = os.path.join(work, "model.gguf")

    def put(name, gguf=None, hf=None):  # the written files as seeds
        if gguf:
            write("model_file", name + ".gguf", open(gguf, "rb").read())
        if hf:
            write("hf_directory", name, framed(hf))

    tokenizer = os.path.join(HERE, "hf_tokenizer")
    os.makedirs(tokenizer, exist_ok=True)
    tm.write_tokenizer(tokenizer, tm.byte_tokens(), {tm.BOS: True, tm.EOS: True}, ["\u0120 t"])
    for name, changes in DENSE_SEEDS.items():
        seed = "seed-" + name
        tm.MODELS[seed] = dict(tm.MODELS[name], config=dict(tm.MODELS[name]["config"], **SMALL, **changes))
        weights = tm.random_weights(seed)
        tm.write_gguf(gguf_path, seed, weights, matrix_dtype=np.float16)
        tm.write_hf(os.path.join(work, seed), seed, weights)
        put(name, gguf_path, os.path.join(work, seed))
    tm.MODELS["seed-gpt-oss"] = dict(tm.MODELS["gpt-oss"], config=dict(
        tm.GPT_OSS, **dict(SMALL, hidden_size=32, intermediate_size=32), num_local_experts=2, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"]))
    tm.MODELS["seed-gpt-oss-mxfp4"] = dict(tm.MODELS["seed-gpt-oss"], hf="mxfp4", weights_of="seed-gpt-oss")
    tm.write_gguf(gguf_path, "seed-gpt-oss", tm.random_weights("seed-gpt-oss"), matrix_dtype=np.float16)
    tm.write_hf(os.path.join(work, "mxfp4"), "seed-gpt-oss-mxfp4", tm.random_weights("seed-gpt-oss-mxfp4"))
    put("gpt-oss", gguf_path, os.path.join(work, "mxfp4"))
    for name, changes in HYBRID_SEEDS.items():
        seed = "seed-" + name
        th.MODELS[seed] = dict(th.MODELS[name], config=dict(th.MODELS[name]["config"], **changes), mtp=False)
        th.write_gguf(gguf_path, seed, th.random_weights(seed, matrix_dtype=np.float16))
        th.write_hf(os.path.join(work, seed), seed, th.random_weights(seed))
        put(name, gguf_path, os.path.join(work, seed))
    for name, layers in (("dense", dict(num_hidden_layers=3, layer_types=["sliding_attention", "full_attention",
                                                                          "full_attention"], num_kv_shared_layers=1,
                                        hidden_size_per_layer_input=4)),
                         ("moe", dict(num_experts=4, moe_intermediate_size=8))):
        seed = "seed-" + name
        g4.MODELS[seed] = dict(g4.MODELS[name], **SMALL, global_head_dim=16, **layers)
        weights = g4.random_weights(seed)
        g4.write_gguf(gguf_path, seed, weights)
        g4.write_hf(os.path.join(work, seed), seed, weights)
        put("gemma4-" + name, gguf_path, os.path.join(work, seed))
    # Pre-quantized checkpoints of a Llama at dim 32 (whole groups of 32): GPTQ 4-bit act-order, FP8 blocks, NVFP4.
    tm.MODELS["seed-llama32"] = dict(tm.MODELS["llama"], config=dict(
        tm.MODELS["llama"]["config"], **dict(SMALL, hidden_size=32, intermediate_size=32, num_attention_heads=4),
        num_hidden_layers=1))
    weights, nrng = tm.random_weights("seed-llama32"), np.random.default_rng(0)
    gptq = dict(quant_method="gptq", bits=4, group_size=32, desc_act=True, sym=False, checkpoint_format="gptq")
    fp8 = dict(quant_method="fp8", fmt="e4m3", activation_scheme="dynamic", weight_block_size=[32, 32])
    for scheme, config in (("gptq", gptq), ("fp8", fp8), ("nvfp4", pq.NVFP4)):
        tensors = {}
        for name, w in weights.items():
            stem = name[:-len("weight")]
            if w.ndim == 2 and ".layers." in name:
                if scheme == "gptq":
                    parts = pq.gptq(w, 4, False, True, nrng)[0]
                elif scheme == "fp8":
                    codes, scales, _ = pq.fp8(w, (32, 32))
                    parts = {"weight": ("F8_E4M3", codes), "weight_scale_inv": ("F32", scales)}
                else:
                    parts = pq.nvfp4(w)[0]
                tensors.update({stem + k: v for k, v in parts.items()})
            else:
                tensors[name] = ("BF16", (np.asarray(w, np.float32).view(np.uint32) >> 16).astype("<u2"))
        directory = os.path.join(work, scheme)
        tm.write_hf(directory, "seed-llama32", {"model.embed_tokens.weight": np.zeros((1, 1), np.float32)})
        pq.write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
        config_path = os.path.join(directory, "config.json")
        full = json.load(open(config_path))
        full["quantization_config"] = config
        json.dump(full, open(config_path, "w"))
        put(scheme, hf=directory)
    lora_seeds(work)
    shutil.rmtree(work)


def lora_seeds(work):
    """lora_adapter's seeds: a PEFT directory and a GGUF LoRA (none for Granite) for each of its bases (the
    model_file seeds llama.gguf, qwen3_5.gguf, lfm2.gguf, granite_h.gguf: byte 0), every module kind targeted,
    framed as the target reads them (byte 1: 0 GGUF, 1 PEFT, whose adapter_config.json's length, 2 bytes, comes
    first)."""
    import lora_files as lf
    import lora_hybrid_files as lh
    import tiny_hybrid_models as th
    import tiny_models as tm
    import numpy as np

    def put(name, base, path):
        if os.path.isdir(path):
            config = open(os.path.join(path, "adapter_config.json"), "rb").read()
            body = b"\1" + struct.pack("<H", len(config)) + config
            body += open(os.path.join(path, "adapter_model.safetensors"), "rb").read()
        else:
            body = b"\0" + open(path, "rb").read()
        write("lora_adapter", name, bytes([base]) + body)

    c = tm.config_of("seed-llama")
    lf.HEADS, lf.KV_HEADS = c["num_attention_heads"], c["num_key_value_heads"]  # its q/k rows' permutation
    weights, rng = tm.random_weights("seed-llama"), np.random.default_rng(1)
    pairs = {}
    for layer in range(c["num_hidden_layers"]):
        for m, (block, _, _) in lf.SHAPES.items():
            out, inp = weights[f"model.layers.{layer}.{block}.{m}.weight"].shape
            pairs[(layer, m)] = (rng.uniform(-1, 1, (2, inp)).astype(np.float32),
                                 rng.uniform(-1, 1, (out, 2)).astype(np.float32))
    lf.write_gguf_lora(os.path.join(work, "llama-lora.gguf"), pairs, 4.0)
    lf.write_peft(os.path.join(work, "llama-peft"), pairs, {"peft_type": "LORA", "r": 2, "lora_alpha": 4.0,
                                                            "target_modules": sorted(lf.SHAPES)})
    put("llama-gguf", 0, os.path.join(work, "llama-lora.gguf"))
    put("llama-peft", 0, os.path.join(work, "llama-peft"))
    for base, family in ((1, "qwen3_5"), (2, "lfm2"), (3, "granite_h")):
        seed = "seed-" + family
        hybrid_pairs = lh.make_adapter(th.random_weights(seed), lh.FAMILIES[family][2], base)
        lh.write_peft(os.path.join(work, family + "-peft"), hybrid_pairs, seed)
        put(family + "-peft", base, os.path.join(work, family + "-peft"))
        if family != "granite_h":  # the e2e writer has GGUF names for LFM2's and Qwen3.5's modules, not Granite's
            lh.write_gguf_lora(os.path.join(work, family + "-lora.gguf"), hybrid_pairs, seed)
            put(family + "-gguf", base, os.path.join(work, family + "-lora.gguf"))


if __name__ == "__main__":
    main()
