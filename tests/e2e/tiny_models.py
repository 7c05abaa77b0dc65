"""Seeded random-weight tiny models of every family cbatch runs, written as Hugging Face directories
(config.json with the family's own field names, model.safetensors written here with numpy, a byte-level
BPE tokenizer.json) and, with the same weights, as GGUF files the way llama.cpp's converter writes them
(its tensor and metadata names, q/k rows permuted for adjacent-pair RoPE in `llama` files only, Gemma norm
weights stored as 1 + w, Phi-3's fused tensors kept fused, nothing llama.cpp hard-codes: Gemma 3's window
pattern and local base, Gemma's query scale). Every family feature is exercised: norm weights and biases
are random, windows are shorter than the test prompts, RoPE bases differ from the default.

MODELS names each model: its family, config fields over BASE, how its directory is written (`hf`: "v4" as
transformers 4 saves (rope_theta, rope_local_base_freq, sliding_window_pattern), "v5" as transformers 5
saves (rope_parameters instead of rope_theta, layer_types, dtype), "multimodal" as Gemma 3 4B+ ships
(model_type gemma3, text_config, language_model.model. tensors)), its safetensors dtype and shards, and
whether a GGUF is written too (llama.cpp keeps no Qwen window and no layer_types: directory-only models).

Mixtures of experts (MOE_MODELS, rows of MODELS with `moe`: Qwen3-MoE, Qwen2-MoE, Mixtral, OLMoE): their
directories name experts as the Hub ships them (mlp.gate router (experts, dim), mlp.experts.M.{gate,up,down}_proj;
Qwen2-MoE's mlp.shared_expert.* and mlp.shared_expert_gate (1, dim); Mixtral's block_sparse_moe.gate and
experts.M.w1 (gate), w3 (up), w2 (down)); their GGUFs stack the experts as llama.cpp's converter does
(ffn_gate_inp (experts, dim), ffn_{gate,up}_exps (experts, width, dim), ffn_down_exps (experts, dim, width),
Qwen2-MoE's ffn_*_shexp and ffn_gate_inp_shexp (dim)), under arch qwen3moe, qwen2moe, olmoe, and `llama` for
Mixtral (q/k permuted), with {arch}.expert_count, expert_used_count and, for the Qwen models,
expert_feed_forward_length and expert_shared_feed_forward_length (Mixtral's and OLMoE's expert width is
their intermediate_size, feed_forward_length). Router weights are scaled up (ROUTER_SCALE) so that
tokens pick different experts with clear gaps between the k-th and the (k+1)-th router logit."""
import json
import os
import struct
import zlib

import numpy as np

VOCAB = 300
BOS, EOS = 256, 257

BASE = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": VOCAB, "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "bos_token_id": BOS, "eos_token_id": EOS, "num_hidden_layers": 3, "tie_word_embeddings": False}
GEMMA = dict(hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True)
MODELS = {
    "llama": dict(family="llama", config=dict(model_type="llama", rope_theta=500000.0)),
    "mistral": dict(family="mistral", config=dict(model_type="mistral", sliding_window=9)),
    "qwen2": dict(family="qwen2", dtype="BF16",
                  config=dict(model_type="qwen2", tie_word_embeddings=True, rope_theta=1000000.0,
                              use_sliding_window=False, sliding_window=12, max_window_layers=1)),
    "qwen2-window": dict(family="qwen2", gguf=False, shards=2,
                         config=dict(model_type="qwen2", rope_theta=1000000.0, use_sliding_window=True,
                                     sliding_window=10, max_window_layers=1)),
    "qwen3": dict(family="qwen3", config=dict(model_type="qwen3", head_dim=32, rope_theta=1000000.0)),
    "qwen3-v5": dict(family="qwen3", hf="v5", gguf=False,
                     config=dict(model_type="qwen3", head_dim=32, rope_theta=1000000.0, num_hidden_layers=2)),
    "gemma2": dict(family="gemma2", config=dict(
        GEMMA, model_type="gemma2", head_dim=32, num_hidden_layers=4, sliding_window=11, query_pre_attn_scalar=8,
        attn_logit_softcapping=2.0, final_logit_softcapping=3.0),
        gguf_differs="a GGUF keeps no query_pre_attn_scalar: llama.cpp scales queries by 1/sqrt(head_dim)"),
    "gemma3": dict(family="gemma3", config=dict(
        GEMMA, model_type="gemma3_text", head_dim=32, num_hidden_layers=7, sliding_window=10, sliding_window_pattern=6,
        query_pre_attn_scalar=32, rope_theta=1000000.0, rope_local_base_freq=10000.0)),
    "gemma3-multimodal": dict(family="gemma3", hf="multimodal", gguf=False, config=dict(
        GEMMA, model_type="gemma3_text", head_dim=32, num_hidden_layers=5, sliding_window=8, query_pre_attn_scalar=12,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"],
        rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 4.0})),
    "phi3": dict(family="phi3", config=dict(model_type="phi3", sliding_window=12, rms_norm_eps=1e-5)),
    # Mixtures of experts. norm_topk_prob: Qwen3-MoE renormalises (as llama.cpp always does for qwen3moe),
    # Qwen2-MoE and OLMoE do not (llama.cpp never does for theirs); Mixtral always does (no field).
    "qwen3-moe": dict(family="qwen3_moe", moe=True, config=dict(
        model_type="qwen3_moe", head_dim=32, rope_theta=1000000.0, num_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=48, decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=True,
        use_sliding_window=False)),
    "qwen2-moe": dict(family="qwen2_moe", moe=True, dtype="BF16", config=dict(
        model_type="qwen2_moe", rope_theta=1000000.0, num_experts=6, num_experts_per_tok=2,
        moe_intermediate_size=40, shared_expert_intermediate_size=80, decoder_sparse_step=1, mlp_only_layers=[],
        norm_topk_prob=False, use_sliding_window=False)),
    "mixtral": dict(family="mixtral", moe=True, config=dict(
        model_type="mixtral", rope_theta=1000000.0, num_local_experts=4, num_experts_per_tok=2,
        intermediate_size=64, sliding_window=None)),
    "olmoe": dict(family="olmoe", moe=True, config=dict(
        model_type="olmoe", num_experts=8, num_experts_per_tok=2, intermediate_size=48, norm_topk_prob=False,
        rms_norm_eps=1e-5, clip_qkv=None)),
}
MOE_MODELS = [name for name, spec in MODELS.items() if spec.get("moe")]
GGUF_ARCH = {"mistral": "llama", "mixtral": "llama", "qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe"}
ROUTER_SCALE = 4.0
# The Hugging Face names of a sparse layer's router and experts, after "model.layers.N.".
MOE_NAMES = {"mixtral": dict(router="block_sparse_moe.gate.weight", expert="block_sparse_moe.experts.{}.{}.weight",
                             gate="w1", up="w3", down="w2")}
MOE_NAMES_DEFAULT = dict(router="mlp.gate.weight", expert="mlp.experts.{}.{}.weight",
                         gate="gate_proj", up="up_proj", down="down_proj")
EMBED_STD = {"tied": 0.15, "gemma2": 0.125, "gemma3": 0.07}


def config_of(name, spec=None):
    """The config of model `name`: BASE with its row's fields (spec: a row of MODELS' form, for a model
    defined elsewhere, e.g. tools/make_random_gguf.py)."""
    c = dict(BASE)
    c.update((spec or MODELS[name])["config"])
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    return c


def num_experts(c):
    return c.get("num_experts", c.get("num_local_experts", 0))


def is_sparse_layer(c, i):
    """Whether layer i of a model with config c is a mixture of experts (the Qwen MoE rule, which the other
    families satisfy with their defaults: every layer)."""
    return (num_experts(c) > 0 and i not in c.get("mlp_only_layers", [])
            and (i + 1) % c.get("decoder_sparse_step", 1) == 0)


def moe_names(family):
    return MOE_NAMES.get(family, MOE_NAMES_DEFAULT)


def moe_weights(c, family, linear):
    """HF-named tensors of one sparse layer (after "model.layers.N.")."""
    names, dim = moe_names(family), c["hidden_size"]
    width = c.get("moe_intermediate_size", c["intermediate_size"])
    w = {names["router"]: linear(num_experts(c), dim) * np.float32(ROUTER_SCALE)}
    for e in range(num_experts(c)):
        w[names["expert"].format(e, names["gate"])] = linear(width, dim)
        w[names["expert"].format(e, names["up"])] = linear(width, dim)
        w[names["expert"].format(e, names["down"])] = linear(dim, width)
    if c.get("shared_expert_intermediate_size"):
        shared = c["shared_expert_intermediate_size"]
        w["mlp.shared_expert.gate_proj.weight"], w["mlp.shared_expert.up_proj.weight"] = \
            linear(shared, dim), linear(shared, dim)
        w["mlp.shared_expert.down_proj.weight"] = linear(dim, shared)
        w["mlp.shared_expert_gate.weight"] = linear(1, dim) * np.float32(2.0)
    return w


def to_bf16(a):
    """a rounded to the nearest bfloat16 (ties to even), as float32."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def random_weights(name, spec=None):
    """HF-named float32 tensors of the tiny model `name` (its family's names, without a prefix), seeded by
    the name; spec as in config_of."""
    spec = spec or MODELS[name]
    c, family, vocab = config_of(name, spec), spec["family"], config_of(name, spec)["vocab_size"]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    dim, hidden, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q_dim, kv_dim = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    gemma = family.startswith("gemma")

    def linear(out, inp):
        return (rng.uniform(-1, 1, (out, inp)) * np.sqrt(3.0 / inp)).astype(np.float32)

    def norm(n):  # the definition's w: near 1 for Llama-style x * w, near 0 for Gemma's x * (1 + w)
        return ((0.0 if gemma else 1.0) + rng.uniform(-0.4, 0.4, n)).astype(np.float32)

    # Embeddings small enough that the layers, not the input token, decide the output: a tied head would
    # otherwise mostly echo the input, and Gemma scales embeddings by sqrt(hidden).
    std = EMBED_STD.get(family, 1.0) if not c["tie_word_embeddings"] or gemma else EMBED_STD["tied"]
    w = {"model.embed_tokens.weight": rng.normal(0, std, (vocab, dim)).astype(np.float32)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(dim)
        q, k, v = linear(q_dim, dim), linear(kv_dim, dim), linear(kv_dim, dim)
        if family == "phi3":
            w[p + "self_attn.qkv_proj.weight"] = np.concatenate([q, k, v])
        else:
            for x, t in (("q", q), ("k", k), ("v", v)):
                w[p + f"self_attn.{x}_proj.weight"] = t
        if family in ("qwen2", "qwen2_moe"):
            for x, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
                w[p + f"self_attn.{x}_proj.bias"] = rng.uniform(-0.5, 0.5, n).astype(np.float32)
        if family in ("qwen3", "qwen3_moe", "gemma3"):
            w[p + "self_attn.q_norm.weight"], w[p + "self_attn.k_norm.weight"] = norm(hd), norm(hd)
        if family == "olmoe":  # over the whole projection
            w[p + "self_attn.q_norm.weight"], w[p + "self_attn.k_norm.weight"] = norm(q_dim), norm(kv_dim)
        w[p + "self_attn.o_proj.weight"] = linear(dim, q_dim)
        w[p + "post_attention_layernorm.weight"] = norm(dim)
        if gemma:
            w[p + "pre_feedforward_layernorm.weight"] = norm(dim)
            w[p + "post_feedforward_layernorm.weight"] = norm(dim)
        if is_sparse_layer(c, i):
            w.update({p + k: t for k, t in moe_weights(c, family, linear).items()})
            continue
        gate, up = linear(hidden, dim), linear(hidden, dim)
        if family == "phi3":
            w[p + "mlp.gate_up_proj.weight"] = np.concatenate([gate, up])
        else:
            w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"] = gate, up
        w[p + "mlp.down_proj.weight"] = linear(dim, hidden)
    w["model.norm.weight"] = norm(dim)
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = linear(vocab, dim)
    if spec.get("dtype") == "BF16":
        w = {k: to_bf16(t) for k, t in w.items()}
    return w


def byte_tokens():
    """GPT-2's byte-to-character map: the 256 byte tokens' texts, the two special tokens, one merged token
    ("Ġt", the result of the one merge), fillers."""
    bs = [b for lo, hi in (("!", "~"), ("¡", "¬"), ("®", "ÿ")) for b in range(ord(lo), ord(hi) + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)] + ["<s>", "</s>", "Ġt"] + [f"<extra_{i}>" for i in range(VOCAB - 259)]


def write_safetensors(path, tensors, dtype="F32"):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        t = np.ascontiguousarray(t, dtype=np.float32)
        data = (t.view(np.uint32) >> 16).astype("<u2").tobytes() if dtype == "BF16" else t.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def hf_config(name):
    """config.json's contents in the model's layout (see MODELS)."""
    c, layout = config_of(name), MODELS[name].get("hf", "v4")
    c["torch_dtype"] = "bfloat16" if MODELS[name].get("dtype") == "BF16" else "float32"
    if layout == "v5":
        c["dtype"] = c.pop("torch_dtype")
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": c.pop("rope_theta")}
        c.setdefault("use_sliding_window", False)
        c["layer_types"] = ["full_attention"] * c["num_hidden_layers"]
    if layout == "multimodal":
        ids = {k: c.pop(k) for k in ("bos_token_id", "eos_token_id")}
        return {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], **ids, "text_config": c,
                "vision_config": {"model_type": "siglip_vision_model"}, "torch_dtype": c["torch_dtype"]}
    return c


def write_hf(directory, name, weights):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(hf_config(name), f, indent=1)
    layout, dtype = MODELS[name].get("hf", "v4"), MODELS[name].get("dtype", "F32")
    if layout == "multimodal":
        weights = {("language_model." + k): t for k, t in weights.items()}
    num_shards = MODELS[name].get("shards", 1)
    if num_shards > 1:  # the shards and their index
        names = list(weights)
        shards = {f"model-{i + 1:05d}-of-{num_shards:05d}.safetensors": names[i::num_shards] for i in range(num_shards)}
        for shard, keys in shards.items():
            write_safetensors(os.path.join(directory, shard), {k: weights[k] for k in keys}, dtype)
        index = {"metadata": {}, "weight_map": {k: s for s, keys in shards.items() for k in keys}}
        with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f)
    else:
        write_safetensors(os.path.join(directory, "model.safetensors"), weights, dtype)
    tokens = byte_tokens()
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in (BOS, EOS)]
    tokenizer = {"version": "1.0", "added_tokens": added, "normalizer": None,
                 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                   "use_regex": True},
                 "post_processor": None, "decoder": {"type": "ByteLevel"},
                 "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)}, "merges": ["Ġ t"]}}
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": False}, f)


def permute_for_adjacent_pairs(w, n_heads):
    """llama.cpp's permutation of `llama` q/k rows: HF's rotate-half pairs become adjacent pairs."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_byte_tokenizer(writer):
    """The tokenizer keys of the byte-level vocabulary of byte_tokens()."""
    tokens = byte_tokens()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 256 + [3, 3] + [1] * (VOCAB - 258))
    writer.add_token_merges(["Ġ t"])
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_add_bos_token(False)


def write_gguf_metadata(writer, spec, arch, c, tokenizer=write_byte_tokenizer):
    family = spec["family"]
    p = arch + "."
    for key, value in (("context_length", c["max_position_embeddings"]), ("embedding_length", c["hidden_size"]),
                       ("block_count", c["num_hidden_layers"]), ("feed_forward_length", c["intermediate_size"]),
                       ("attention.head_count", c["num_attention_heads"]),
                       ("attention.head_count_kv", c["num_key_value_heads"]),
                       ("attention.key_length", c["head_dim"]), ("attention.value_length", c["head_dim"]),
                       ("rope.dimension_count", c["head_dim"])):
        writer.add_uint32(p + key, value)
    writer.add_float32(p + "attention.layer_norm_rms_epsilon", c["rms_norm_eps"])
    writer.add_float32(p + "rope.freq_base", c["rope_theta"])
    if c.get("sliding_window") and family in ("mistral", "gemma2", "gemma3", "phi3"):
        writer.add_uint32(p + "attention.sliding_window", c["sliding_window"])
    if spec.get("moe"):
        writer.add_uint32(p + "expert_count", num_experts(c))
        writer.add_uint32(p + "expert_used_count", c["num_experts_per_tok"])
        for key, field in (("expert_feed_forward_length", "moe_intermediate_size"),
                           ("expert_shared_feed_forward_length", "shared_expert_intermediate_size")):
            if c.get(field):
                writer.add_uint32(p + key, c[field])
    if family == "gemma2":
        writer.add_float32(p + "attn_logit_softcapping", c["attn_logit_softcapping"])
        writer.add_float32(p + "final_logit_softcapping", c["final_logit_softcapping"])
    tokenizer(writer)


def put_moe(put, b, layer, c, family):
    """A sparse layer's tensors as llama.cpp's converter writes them: experts stacked into 3-D tensors."""
    names = moe_names(family)
    put(b + "ffn_gate_inp.weight", layer[names["router"]])
    for x in ("gate", "up", "down"):
        put(b + f"ffn_{x}_exps.weight",
            np.stack([layer[names["expert"].format(e, names[x])] for e in range(num_experts(c))]))
    if "mlp.shared_expert_gate.weight" in layer:
        for x in ("gate", "up", "down"):
            put(b + f"ffn_{x}_shexp.weight", layer[f"mlp.shared_expert.{x}_proj.weight"])
        put(b + "ffn_gate_inp_shexp.weight", layer["mlp.shared_expert_gate.weight"].reshape(-1))


def write_gguf(path, name, weights, config=None, edits=None, ffn_qtype=None, spec=None,
               tokenizer=write_byte_tokenizer, matrix_dtype=np.float32):
    """The GGUF of model `name`; a bad file for a test when config (the config with changes) or edits (GGUF
    tensor name -> its replacement, or None to leave it out) are given; ffn_qtype (a
    gguf.GGMLQuantizationType) quantizes the FFN matrices with the gguf package, the rest stays float32
    (matrices: matrix_dtype, np.float32 or np.float16). spec as in config_of; tokenizer(writer) writes the
    tokenizer keys."""
    import gguf
    from gguf.quants import quantize
    spec = spec or MODELS[name]
    c, family = config or config_of(name, spec), spec["family"]
    arch = GGUF_ARCH.get(family, family)
    gemma = family.startswith("gemma")
    writer = gguf.GGUFWriter(path, arch)
    write_gguf_metadata(writer, spec, arch, c, tokenizer)

    def put(gguf_name, t):
        if edits and gguf_name in edits:
            t = edits[gguf_name]
            if t is None:
                return
        if gemma and gguf_name.endswith("norm.weight"):
            t = t + np.float32(1.0)
        t = np.ascontiguousarray(t, dtype=np.float32)
        if ffn_qtype is not None and gguf_name.split(".")[-2] in ("ffn_gate", "ffn_up", "ffn_down"):
            writer.add_tensor(gguf_name, quantize(t, ffn_qtype), raw_dtype=ffn_qtype)
        else:
            writer.add_tensor(gguf_name, t.astype(matrix_dtype, copy=False) if t.ndim > 1 else t)

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
        for x in "qkv":
            if h + f"self_attn.{x}_proj.bias" in weights:
                put(b + f"attn_{x}.bias", weights[h + f"self_attn.{x}_proj.bias"])
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
        if is_sparse_layer(c, i):
            put_moe(put, b, {k[len(h):]: t for k, t in weights.items() if k.startswith(h)}, c, family)
        elif family != "phi3":
            for x in ("gate", "up", "down"):
                put(b + f"ffn_{x}.weight", weights[h + f"mlp.{x}_proj.weight"])
        else:
            put(b + "ffn_down.weight", weights[h + "mlp.down_proj.weight"])
    put("output_norm.weight", weights["model.norm.weight"])
    if "lm_head.weight" in weights:
        put("output.weight", weights["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
