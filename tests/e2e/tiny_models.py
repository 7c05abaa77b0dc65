"""Seeded random-weight tiny models of every family cbatch runs, written twice with the same weights: as a
Hugging Face directory (config.json with the family's own field names, model.safetensors written here
with numpy, a byte-level tokenizer.json) and as a GGUF the way llama.cpp's converter writes it (its
tensor and metadata names, q/k rows permuted for adjacent-pair RoPE in `llama` files only, Gemma norm
weights stored as 1 + w, Phi-3's fused tensors kept fused). Every family feature is exercised: norm
weights and biases are random, windows are smaller than the test prompts."""
import json
import os
import struct

import numpy as np

VOCAB = 300
BOS, EOS = 256, 257

BASE = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": VOCAB, "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "bos_token_id": BOS, "eos_token_id": EOS, "num_hidden_layers": 3, "tie_word_embeddings": False}
FAMILIES = {
    "llama": dict(model_type="llama"),
    "mistral": dict(model_type="mistral", sliding_window=9),
    "qwen2": dict(model_type="qwen2", tie_word_embeddings=True, rope_theta=1000000.0),
    "qwen3": dict(model_type="qwen3", head_dim=32, rope_theta=1000000.0),
    "gemma2": dict(model_type="gemma2", head_dim=16, num_hidden_layers=4, sliding_window=11,
                   query_pre_attn_scalar=24, attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
                   hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True),
    "gemma3": dict(model_type="gemma3_text", head_dim=32, num_hidden_layers=7, sliding_window=10,
                   sliding_window_pattern=6, query_pre_attn_scalar=32, rope_theta=1000000.0,
                   rope_local_base_freq=10000.0, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True),
    "phi3": dict(model_type="phi3", sliding_window=12, num_key_value_heads=4),
}
GGUF_ARCH = {"mistral": "llama"}


def config_of(family):
    c = dict(BASE)
    c.update(FAMILIES[family])
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    return c


def random_weights(family, seed):
    """HF-named float32 tensors of a tiny model of `family`."""
    c = config_of(family)
    rng = np.random.default_rng(seed)
    dim, hidden, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q_dim, kv_dim = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    gemma = family.startswith("gemma")

    def linear(out, inp):
        return (rng.uniform(-1, 1, (out, inp)) * np.sqrt(3.0 / inp)).astype(np.float32)

    def norm(n):  # the definition's w: near 1 for Llama-style x * w, near 0 for Gemma's x * (1 + w)
        return ((0.0 if gemma else 1.0) + rng.uniform(-0.3, 0.3, n)).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.normal(0, 1, (VOCAB, dim)).astype(np.float32)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(dim)
        q, k, v = linear(q_dim, dim), linear(kv_dim, dim), linear(kv_dim, dim)
        if family == "phi3":
            w[p + "self_attn.qkv_proj.weight"] = np.concatenate([q, k, v])
        else:
            w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"], w[p + "self_attn.v_proj.weight"] = q, k, v
        if family == "qwen2":
            for name, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
                w[p + f"self_attn.{name}_proj.bias"] = rng.uniform(-0.5, 0.5, n).astype(np.float32)
        if family in ("qwen3", "gemma3"):
            w[p + "self_attn.q_norm.weight"], w[p + "self_attn.k_norm.weight"] = norm(hd), norm(hd)
        w[p + "self_attn.o_proj.weight"] = linear(dim, q_dim)
        if gemma:
            w[p + "post_attention_layernorm.weight"] = norm(dim)
            w[p + "pre_feedforward_layernorm.weight"] = norm(dim)
            w[p + "post_feedforward_layernorm.weight"] = norm(dim)
        else:
            w[p + "post_attention_layernorm.weight"] = norm(dim)
        gate, up = linear(hidden, dim), linear(hidden, dim)
        if family == "phi3":
            w[p + "mlp.gate_up_proj.weight"] = np.concatenate([gate, up])
        else:
            w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"] = gate, up
        w[p + "mlp.down_proj.weight"] = linear(dim, hidden)
    w["model.norm.weight"] = norm(dim)
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = linear(VOCAB, dim)
    return w


def byte_tokens():
    """GPT-2's byte-to-character map: the 256 byte tokens' texts, the two special tokens, one merged token
    ("Ġt", the result of the one merge), fillers."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)] + ["<s>", "</s>", "Ġt"] + [f"<extra_{i}>" for i in range(VOCAB - 259)]


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        data = np.ascontiguousarray(t, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def write_hf(directory, family, weights):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config_of(family), f, indent=1)
    write_safetensors(os.path.join(directory, "model.safetensors"), weights)
    tokens = byte_tokens()
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in (BOS, EOS)]
    tokenizer = {"version": "1.0", "added_tokens": added, "normalizer": None,
                 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
                 "post_processor": None, "decoder": {"type": "ByteLevel"},
                 "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)}, "merges": ["Ġ t"]}}
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": False}, f)


def permute_for_adjacent_pairs(w, n_heads):
    """llama.cpp's permutation of `llama` q/k rows: HF's rotate-half pairs become adjacent pairs."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, family, weights):
    import gguf
    c = config_of(family)
    arch = GGUF_ARCH.get(family, family)
    gemma = family.startswith("gemma")
    writer = gguf.GGUFWriter(path, arch)
    p = arch + "."
    writer.add_uint32(p + "context_length", c["max_position_embeddings"])
    writer.add_uint32(p + "embedding_length", c["hidden_size"])
    writer.add_uint32(p + "block_count", c["num_hidden_layers"])
    writer.add_uint32(p + "feed_forward_length", c["intermediate_size"])
    writer.add_uint32(p + "attention.head_count", c["num_attention_heads"])
    writer.add_uint32(p + "attention.head_count_kv", c["num_key_value_heads"])
    writer.add_uint32(p + "attention.key_length", c["head_dim"])
    writer.add_uint32(p + "attention.value_length", c["head_dim"])
    writer.add_float32(p + "attention.layer_norm_rms_epsilon", c["rms_norm_eps"])
    writer.add_float32(p + "rope.freq_base", c["rope_theta"])
    if c.get("sliding_window"):
        writer.add_uint32(p + "attention.sliding_window", c["sliding_window"])
    if family == "gemma2":
        writer.add_float32(p + "attn_logit_softcapping", c["attn_logit_softcapping"])
        writer.add_float32(p + "final_logit_softcapping", c["final_logit_softcapping"])
    if gemma and c["query_pre_attn_scalar"] != c["head_dim"]:  # not a llama.cpp key: cbatch reads it if present
        writer.add_float32(p + "attention.scale", c["query_pre_attn_scalar"] ** -0.5)
    tokens = byte_tokens()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 256 + [3, 3] + [1] * (VOCAB - 258))
    writer.add_token_merges(["Ġ t"])
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_add_bos_token(False)

    def put(name, t):
        if gemma and name.endswith("norm.weight"):
            t = t + 1.0
        writer.add_tensor(name, np.ascontiguousarray(t, dtype=np.float32))

    put("token_embd.weight", weights["model.embed_tokens.weight"])
    for i in range(c["num_hidden_layers"]):
        h, b = f"model.layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", weights[h + "input_layernorm.weight"])
        if family == "phi3":
            put(b + "attn_qkv.weight", weights[h + "self_attn.qkv_proj.weight"])
            put(b + "ffn_up.weight", weights[h + "mlp.gate_up_proj.weight"])
        else:
            q, k = weights[h + "self_attn.q_proj.weight"], weights[h + "self_attn.k_proj.weight"]
            if arch == "llama":
                q = permute_for_adjacent_pairs(q, c["num_attention_heads"])
                k = permute_for_adjacent_pairs(k, c["num_key_value_heads"])
            put(b + "attn_q.weight", q)
            put(b + "attn_k.weight", k)
            put(b + "attn_v.weight", weights[h + "self_attn.v_proj.weight"])
            put(b + "ffn_gate.weight", weights[h + "mlp.gate_proj.weight"])
            put(b + "ffn_up.weight", weights[h + "mlp.up_proj.weight"])
        for name in ("q", "k", "v"):
            if h + f"self_attn.{name}_proj.bias" in weights:
                put(b + f"attn_{name}.bias", weights[h + f"self_attn.{name}_proj.bias"])
        if h + "self_attn.q_norm.weight" in weights:
            put(b + "attn_q_norm.weight", weights[h + "self_attn.q_norm.weight"])
            put(b + "attn_k_norm.weight", weights[h + "self_attn.k_norm.weight"])
        put(b + "attn_output.weight", weights[h + "self_attn.o_proj.weight"])
        if gemma:
            put(b + "post_attention_norm.weight", weights[h + "post_attention_layernorm.weight"])
            put(b + "ffn_norm.weight", weights[h + "pre_feedforward_layernorm.weight"])
            put(b + "post_ffw_norm.weight", weights[h + "post_feedforward_layernorm.weight"])
        else:
            put(b + "ffn_norm.weight", weights[h + "post_attention_layernorm.weight"])
        put(b + "ffn_down.weight", weights[h + "mlp.down_proj.weight"])
    put("output_norm.weight", weights["model.norm.weight"])
    if "lm_head.weight" in weights:
        put("output.weight", weights["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
