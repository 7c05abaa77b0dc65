"""Seeded random-weight tiny models of every family cbatch runs, written as Hugging Face directories
(config.json with the family's own field names, model.safetensors written here with numpy, a byte-level
BPE tokenizer.json) and, with the same weights, as GGUF files the way llama.cpp's converter writes them
(its tensor and metadata names, q/k rows permuted for adjacent-pair RoPE in `llama` files only, Gemma norm
weights stored as 1 + w, Phi-3's fused tensors kept fused, nothing llama.cpp hard-codes: Gemma 3's window
pattern and local base, Gemma's query scale, SmolLM3's NoPE step (`smollm3` q/k rows permuted as `llama`'s)). Every family feature is exercised: norm weights and biases
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
tokens pick different experts with clear gaps between the k-th and the (k+1)-th router logit.

gpt-oss (GPT_OSS_MODELS, written by gpt_oss_weights / write_gpt_oss): q/k/v/o biases, self_attn.sinks
(heads), mlp.router.{weight,bias}, and stacked experts as transformers holds them: mlp.experts.gate_up_proj
(experts, dim, 2 * width) with gate and up interleaved (gate = [..., ::2], up = [..., 1::2]),
gate_up_proj_bias (experts, 2 * width) likewise, down_proj (experts, width, dim), down_proj_bias (experts,
dim); "mxfp4" directories hold the two matrices as the shipped checkpoints do, gate_up_proj_blocks (experts,
2 * width, dim / 32, 16: byte i = element 2i in the low nibble, 2i + 1 in the high one) and _scales (experts,
2 * width, dim / 32: E8M0), down_proj_blocks/_scales (experts, dim, width / 32, ...). Expert matrices are
drawn as MXFP4 values (E2M1 codes times powers of two), so the bf16 directory, the MXFP4 one and the GGUF
(arch gpt-oss: ffn_{gate,up,down}_exps weight and bias de-interleaved, ffn_gate_inp weight and bias,
attn_sinks, attn_{q,k,v,output}.bias, post_attention_norm as the FFN norm, yarn rope.scaling keys) hold the
same numbers. The gate|up weights are large enough that the SwiGLU clamp (7) bites, the sinks large enough
to take a share of every softmax, the window (8) shorter than the prompts, YaRN's original context (128, not
4096) short enough that truncate: false changes the tokens of prompts this short."""
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
    # SmolLM3: layer 3 NoPE (the list llama.cpp's hard-coded step of 4 gives, so the GGUF agrees), YaRN whose
    # factor is max_position_embeddings / original_max_position_embeddings (transformers derives it so), tied.
    "smollm3": dict(family="smollm3", config=dict(
        model_type="smollm3", num_hidden_layers=4, no_rope_layers=[1, 1, 1, 0], rope_theta=5000000.0,
        tie_word_embeddings=True, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 64})),
    # Its own list (NoPE layers 0 and 2), no scaling: a GGUF cannot say this (llama.cpp's step is 4).
    "smollm3-list": dict(family="smollm3", gguf=False, config=dict(
        model_type="smollm3", num_hidden_layers=5, no_rope_layers=[0, 1, 0, 1, 1], rope_theta=2000000.0)),
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
GPT_OSS = dict(model_type="gpt_oss", hidden_size=64, intermediate_size=32, num_attention_heads=6, num_key_value_heads=2,
               head_dim=16, num_local_experts=8, num_experts_per_tok=2, experts_per_token=2, sliding_window=8,
               layer_types=["sliding_attention", "full_attention", "sliding_attention"], rope_theta=150000.0,
               rope_scaling=dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0, truncate=False,
                                 original_max_position_embeddings=128),
               swiglu_limit=7.0, attention_bias=True, rms_norm_eps=1e-5, hidden_act="silu")
MODELS["gpt-oss"] = dict(family="gpt_oss", moe=True, gpt_oss=True, dtype="BF16", config=GPT_OSS)
MODELS["gpt-oss-mxfp4"] = dict(family="gpt_oss", moe=True, gpt_oss=True, dtype="BF16", hf="mxfp4", gguf=False,
                               weights_of="gpt-oss", config=GPT_OSS)
MOE_MODELS = [name for name, spec in MODELS.items() if spec.get("moe") and not spec.get("gpt_oss")]
GPT_OSS_MODELS = [name for name, spec in MODELS.items() if spec.get("gpt_oss")]
GGUF_ARCH = {"mistral": "llama", "mixtral": "llama", "qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe",
             "gpt_oss": "gpt-oss"}
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
    if spec.get("gpt_oss"):
        return gpt_oss_weights(name)
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


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def mxfp4_values(rng, shape, exponents):
    """Random MXFP4-representable values (..., cols): E2M1 codes times 2^e, e drawn per 32-value block."""
    codes = rng.integers(0, 16, shape)
    scales = rng.choice(exponents, shape[:-1] + (shape[-1] // 32,)).astype(np.float32)
    return (E2M1[codes] * np.repeat(2.0 ** scales, 32, axis=-1)).astype(np.float32)


def mxfp4_pair(values):
    """values (..., cols), exactly representable, as HF's pair: blocks (..., cols / 32, 16) and scales
    (..., cols / 32), both U8."""
    blocks = values.reshape(values.shape[:-1] + (values.shape[-1] // 32, 32)).astype(np.float64)
    top = np.abs(blocks).max(axis=-1)
    exps = np.where(top > 0, np.floor(np.log2(np.where(top > 0, top, 1))) - 2, 0)  # top / 2^e in [4, 8)
    scaled = blocks / 2.0 ** exps[..., None]
    codes = np.abs(scaled[..., None] - E2M1.astype(np.float64)).argmin(axis=-1)
    codes = np.where(np.signbit(scaled) & (scaled != 0), codes | 8, codes & 7)
    assert np.array_equal(E2M1[codes] * 2.0 ** exps[..., None], blocks), "values not representable in MXFP4"
    packed = (codes[..., 0::2] | codes[..., 1::2] << 4).astype(np.uint8)
    return packed, (exps + 127).astype(np.uint8)


def gpt_oss_weights(name):
    """gpt-oss's HF-named float32 tensors (bf16-exact), seeded by the name it takes its weights of."""
    source = MODELS[name].get("weights_of", name)
    c = config_of(source)
    rng = np.random.default_rng(zlib.crc32(source.encode()))
    dim, width, hd, n = c["hidden_size"], c["intermediate_size"], c["head_dim"], c["num_local_experts"]
    q_dim, kv_dim = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd

    def linear(out, inp):
        return (rng.uniform(-1, 1, (out, inp)) * np.sqrt(3.0 / inp)).astype(np.float32)

    def vector(n_values, lo, hi):
        return rng.uniform(lo, hi, n_values).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.normal(0, 1.0, (VOCAB, dim)).astype(np.float32)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = vector(dim, 0.6, 1.4)
        for x, rows in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
            w[p + f"self_attn.{x}_proj.weight"] = linear(rows, dim)
            w[p + f"self_attn.{x}_proj.bias"] = vector(rows, -0.5, 0.5)
        w[p + "self_attn.o_proj.weight"], w[p + "self_attn.o_proj.bias"] = linear(dim, q_dim), vector(dim, -0.5, 0.5)
        w[p + "self_attn.sinks"] = vector(c["num_attention_heads"], 0.5, 3.0)
        w[p + "post_attention_layernorm.weight"] = vector(dim, 0.6, 1.4)
        w[p + "mlp.router.weight"] = linear(n, dim) * np.float32(ROUTER_SCALE)
        w[p + "mlp.router.bias"] = vector(n, -1.0, 1.0)
        # (experts, out, in) as MXFP4 holds them; gate|up rows interleaved, weights large enough to clamp.
        gate_up_rows = mxfp4_values(rng, (n, 2 * width, dim), [-3, -2])
        down_rows = mxfp4_values(rng, (n, dim, width), [-6, -5])
        w[p + "mlp.experts.gate_up_proj"] = gate_up_rows.transpose(0, 2, 1).copy()
        w[p + "mlp.experts.gate_up_proj_bias"] = rng.uniform(-0.5, 0.5, (n, 2 * width)).astype(np.float32)
        w[p + "mlp.experts.down_proj"] = down_rows.transpose(0, 2, 1).copy()
        w[p + "mlp.experts.down_proj_bias"] = rng.uniform(-0.5, 0.5, (n, dim)).astype(np.float32)
    w["model.norm.weight"] = vector(dim, 0.6, 1.4)
    w["lm_head.weight"] = linear(VOCAB, dim)
    return {k: to_bf16(t) for k, t in w.items()}


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


def put_encoder_layers(put, prefix, layers, dim, hidden):
    """A BERT-style encoder's layers (BERT, XLM-RoBERTa; Hugging Face's names under prefix, e.g.
    "bert.encoder.layer."), each tensor drawn by put(name, *shape, scale=, offset=) in a fixed order."""
    for i in range(layers):
        p = f"{prefix}{i}."
        for m in ("query", "key", "value"):
            put(p + f"attention.self.{m}.weight", dim, dim, scale=0.3)
            put(p + f"attention.self.{m}.bias", dim, scale=0.1)
        put(p + "attention.output.dense.weight", dim, dim, scale=0.2)
        put(p + "attention.output.dense.bias", dim, scale=0.1)
        put(p + "attention.output.LayerNorm.weight", dim, scale=0.1, offset=1.0)
        put(p + "attention.output.LayerNorm.bias", dim, scale=0.1)
        put(p + "intermediate.dense.weight", hidden, dim, scale=0.2)
        put(p + "intermediate.dense.bias", hidden, scale=0.1)
        put(p + "output.dense.weight", dim, hidden, scale=0.2)
        put(p + "output.dense.bias", dim, scale=0.1)
        put(p + "output.LayerNorm.weight", dim, scale=0.1, offset=1.0)
        put(p + "output.LayerNorm.bias", dim, scale=0.1)


def write_safetensors(path, tensors, dtype="F32"):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        kind = "U8" if t.dtype == np.uint8 else dtype  # MXFP4 blocks and scales
        if kind == "U8":
            data = np.ascontiguousarray(t).tobytes()
        else:
            t = np.ascontiguousarray(t, dtype=np.float32)
            data = (t.view(np.uint32) >> 16).astype("<u2").tobytes() if dtype == "BF16" else t.astype("<f4").tobytes()
        header[name] = {"dtype": kind, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
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
    if layout == "mxfp4":
        c["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                                      "model.layers.*.mlp.router"]}
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
    if layout == "mxfp4":
        weights = mxfp4_experts(weights)
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
    write_tokenizer(directory, byte_tokens(), {BOS: True, EOS: True}, ["Ġ t"])


def write_tokenizer(directory, tokens, added, merges, chat_template=None):
    """A byte-level BPE tokenizer.json over `tokens` (added: {id: is_special} of its added tokens) and a
    tokenizer_config.json with <s> / </s> (and the chat template when given)."""
    added_tokens = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
                     "normalized": False, "special": special} for i, special in added.items()]
    tokenizer = {"version": "1.0", "added_tokens": added_tokens, "normalizer": None,
                 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                   "use_regex": True},
                 "post_processor": None, "decoder": {"type": "ByteLevel"},
                 "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}}
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)
    config = {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": False}
    if chat_template is not None:
        config["chat_template"] = chat_template
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)


def mxfp4_experts(weights):
    """gpt-oss's expert matrices (experts, in, out) as the shipped MXFP4 pairs of (experts, out, in)."""
    out = {}
    for k, t in weights.items():
        if k.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            out[k + "_blocks"], out[k + "_scales"] = mxfp4_pair(t.transpose(0, 2, 1))
        else:
            out[k] = t
    return out


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
    if c.get("sliding_window") and family in ("mistral", "gemma2", "gemma3", "phi3", "gpt_oss"):
        writer.add_uint32(p + "attention.sliding_window", c["sliding_window"])
    if spec.get("moe"):
        writer.add_uint32(p + "expert_count", num_experts(c))
        writer.add_uint32(p + "expert_used_count", c["num_experts_per_tok"])
        if family == "gpt_oss":
            writer.add_uint32(p + "expert_feed_forward_length", c["intermediate_size"])
        for key, field in (("expert_feed_forward_length", "moe_intermediate_size"),
                           ("expert_shared_feed_forward_length", "shared_expert_intermediate_size")):
            if c.get(field):
                writer.add_uint32(p + key, c[field])
    scaling = c.get("rope_scaling") or {}
    if scaling.get("rope_type") == "yarn":
        writer.add_string(p + "rope.scaling.type", "yarn")
        writer.add_float32(p + "rope.scaling.factor", scaling["factor"])
        writer.add_uint32(p + "rope.scaling.original_context_length", scaling["original_max_position_embeddings"])
    if family == "gemma2":
        writer.add_float32(p + "attn_logit_softcapping", c["attn_logit_softcapping"])
        writer.add_float32(p + "final_logit_softcapping", c["final_logit_softcapping"])
    tokenizer(writer)


def put_moe(put, b, layer, c, family, legacy_experts=False):
    """A sparse layer's tensors as llama.cpp's converter writes them: experts stacked into 3-D tensors, or
    (legacy_experts) one tensor per expert, blk.N.ffn_gate.E.weight, as Mixtral files before April 2024."""
    names = moe_names(family)
    put(b + "ffn_gate_inp.weight", layer[names["router"]])
    for x in ("gate", "up", "down"):
        experts = [layer[names["expert"].format(e, names[x])] for e in range(num_experts(c))]
        if legacy_experts:
            for e, t in enumerate(experts):
                put(b + f"ffn_{x}.{e}.weight", t)
        else:
            put(b + f"ffn_{x}_exps.weight", np.stack(experts))
    if "mlp.shared_expert_gate.weight" in layer:
        for x in ("gate", "up", "down"):
            put(b + f"ffn_{x}_shexp.weight", layer[f"mlp.shared_expert.{x}_proj.weight"])
        put(b + "ffn_gate_inp_shexp.weight", layer["mlp.shared_expert_gate.weight"].reshape(-1))


def put_gpt_oss_moe(put, b, layer):
    """gpt-oss's router and experts as llama.cpp's converter writes them: gate and up de-interleaved,
    (experts, out, in) matrices, biases (experts, n)."""
    put(b + "ffn_gate_inp.weight", layer["mlp.router.weight"])
    put(b + "ffn_gate_inp.bias", layer["mlp.router.bias"])
    gate_up, bias = layer["mlp.experts.gate_up_proj"].transpose(0, 2, 1), layer["mlp.experts.gate_up_proj_bias"]
    put(b + "ffn_gate_exps.weight", gate_up[:, 0::2])
    put(b + "ffn_gate_exps.bias", bias[:, 0::2])
    put(b + "ffn_up_exps.weight", gate_up[:, 1::2])
    put(b + "ffn_up_exps.bias", bias[:, 1::2])
    put(b + "ffn_down_exps.weight", layer["mlp.experts.down_proj"].transpose(0, 2, 1))
    put(b + "ffn_down_exps.bias", layer["mlp.experts.down_proj_bias"])


def _f16_bytes(x):
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def quantize_q4_k(t):
    """t (rows, cols; cols a multiple of 256) as Q4_K blocks, uint8 (rows, cols / 256 * 144): per 32-element
    sub-block a 6-bit scale and minimum under the superblock's f16 d and dmin, nibbles x = d sc q - dmin m
    (ggml's layout; a plain quantizer, not llama.cpp's search: the tests need valid blocks, not the best)."""
    x = np.asarray(t, dtype=np.float32).reshape(-1, 8, 32)                        # (blocks, sub-block, 32)
    lo = np.minimum(x.min(axis=2), 0.0)
    scale, mins = (x.max(axis=2) - lo) / 15.0, -lo                               # (blocks, 8)
    d = np.float16(scale.max(axis=1) / 63.0).astype(np.float32)
    dmin = np.float16(mins.max(axis=1) / 63.0).astype(np.float32)
    sc = np.clip(np.rint(scale / np.where(d > 0, d, 1)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(mins / np.where(dmin > 0, dmin, 1)[:, None]), 0, 63).astype(np.uint8)
    step = (d[:, None] * sc)[:, :, None]
    q = np.clip(np.rint((x + (dmin[:, None] * m)[:, :, None]) / np.where(step > 0, step, 1)), 0, 15).astype(np.uint8)
    packed = np.empty((x.shape[0], 12), dtype=np.uint8)                          # the 6-bit pairs
    packed[:, 0:4] = sc[:, :4] | (sc[:, 4:] >> 4) << 6
    packed[:, 4:8] = m[:, :4] | (m[:, 4:] >> 4) << 6
    packed[:, 8:12] = (sc[:, 4:] & 15) | (m[:, 4:] & 15) << 4
    qs = (q[:, 0::2] | q[:, 1::2] << 4).reshape(-1, 128)                         # sub-blocks 2i, 2i + 1
    blocks = np.concatenate([_f16_bytes(d), _f16_bytes(dmin), packed, qs], axis=1)
    return blocks.reshape(np.asarray(t).shape[0], -1)


def quantize_q6_k(t):
    """t (rows, cols; cols a multiple of 256) as Q6_K blocks, uint8 (rows, cols / 256 * 210): per 16-element
    sub-block an int8 scale under the superblock's f16 d, x = d sc (q - 32) (ggml's layout)."""
    x = np.asarray(t, dtype=np.float32).reshape(-1, 16, 16)                       # (blocks, sub-block, 16)
    scale = np.abs(x).max(axis=2) / 31.0
    d = np.float16(scale.max(axis=1) / 127.0).astype(np.float32)
    sc = np.clip(np.rint(scale / np.where(d > 0, d, 1)[:, None]), 0, 127).astype(np.int8)
    step = (d[:, None] * sc)[:, :, None]
    q = (np.clip(np.rint(x / np.where(step > 0, step, 1)), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 128)
    ql = (q[:, :, :64] & 15) | (q[:, :, 64:] & 15) << 4                          # (blocks, half, 64)
    hi = q >> 4
    qh = hi[:, :, 0:32] | hi[:, :, 32:64] << 2 | hi[:, :, 64:96] << 4 | hi[:, :, 96:128] << 6
    blocks = np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.view(np.uint8), _f16_bytes(d)], axis=1)
    return blocks.reshape(np.asarray(t).shape[0], -1)


def write_gguf(path, name, weights, config=None, edits=None, ffn_qtype=None, spec=None,
               tokenizer=write_byte_tokenizer, matrix_dtype=np.float32, legacy_experts=False):
    """The GGUF of model `name`; a bad file for a test when config (the config with changes) or edits (GGUF
    tensor name -> its replacement, or None to leave it out) are given; ffn_qtype (a
    gguf.GGMLQuantizationType, or a dict of them by ffn_gate / ffn_up / ffn_down) quantizes the FFN matrices
    (the experts' too) with the gguf package (Q4_K and Q6_K: quantize_q4_k, quantize_q6_k), the rest
    stays float32 (matrices: matrix_dtype, np.float32 or np.float16). spec as in config_of; tokenizer(writer)
    writes the tokenizer keys; legacy_experts: one tensor per expert (put_moe)."""
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
        ffn = gguf_name.split(".")[-2].removesuffix("_exps")
        qtype = ffn_qtype.get(ffn) if isinstance(ffn_qtype, dict) else ffn_qtype
        if qtype is not None and ffn in ("ffn_gate", "ffn_up", "ffn_down"):
            own = {gguf.GGMLQuantizationType.Q4_K: quantize_q4_k, gguf.GGMLQuantizationType.Q6_K: quantize_q6_k}
            if qtype in own:  # the gguf package has no K-quant quantizer
                rows = t.reshape(-1, t.shape[-1])
                q = own[qtype](rows).reshape(t.shape[:-1] + (-1,))
            else:
                q = quantize(t, qtype)
            writer.add_tensor(gguf_name, q, raw_dtype=qtype)
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
            if arch in ("llama", "smollm3"):  # llama.cpp's SmolLM3 converter is its Llama one
                q = permute_for_adjacent_pairs(q, c["num_attention_heads"])
                k = permute_for_adjacent_pairs(k, c["num_key_value_heads"])
            put(b + "attn_q.weight", q)
            put(b + "attn_k.weight", k)
            put(b + "attn_v.weight", weights[h + "self_attn.v_proj.weight"])
        for x, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output")):
            if h + f"self_attn.{x}_proj.bias" in weights:
                put(b + f"attn_{g}.bias", weights[h + f"self_attn.{x}_proj.bias"])
        if h + "self_attn.sinks" in weights:
            put(b + "attn_sinks.weight", weights[h + "self_attn.sinks"])
        if h + "self_attn.q_norm.weight" in weights:
            put(b + "attn_q_norm.weight", weights[h + "self_attn.q_norm.weight"])
            put(b + "attn_k_norm.weight", weights[h + "self_attn.k_norm.weight"])
        put(b + "attn_output.weight", weights[h + "self_attn.o_proj.weight"])
        if gemma:
            put(b + "post_attention_norm.weight", weights[h + "post_attention_layernorm.weight"])
            put(b + "ffn_norm.weight", weights[h + "pre_feedforward_layernorm.weight"])
            put(b + "post_ffw_norm.weight", weights[h + "post_feedforward_layernorm.weight"])
        else:  # llama.cpp's gpt-oss converter calls the FFN norm post_attention_norm
            norm = "post_attention_norm.weight" if family == "gpt_oss" else "ffn_norm.weight"
            put(b + norm, weights[h + "post_attention_layernorm.weight"])
        if family == "gpt_oss":
            put_gpt_oss_moe(put, b, {k[len(h):]: t for k, t in weights.items() if k.startswith(h)})
        elif is_sparse_layer(c, i):
            put_moe(put, b, {k[len(h):]: t for k, t in weights.items() if k.startswith(h)}, c, family, legacy_experts)
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


def write_gpt_oss(directory):
    """The seeded gpt-oss in its three files under directory: the bf16 HF directory, the MXFP4 directory (the
    same values) and the GGUF. Returns (weights, hf_dir, mxfp4_dir, gguf)."""
    weights = random_weights("gpt-oss")
    hf_dir, mxfp4_dir = os.path.join(directory, "gpt-oss"), os.path.join(directory, "gpt-oss-mxfp4")
    gguf = hf_dir + ".gguf"
    write_hf(hf_dir, "gpt-oss", weights)
    write_hf(mxfp4_dir, "gpt-oss-mxfp4", random_weights("gpt-oss-mxfp4"))
    write_gguf(gguf, "gpt-oss", weights)
    return weights, hf_dir, mxfp4_dir, gguf


def write_scripted(directory, script, added=(), special=(), chat_template=""):
    """A one-layer Llama HF directory that always emits a chosen token sequence: token `script[i + 1]`
    follows `script[i]`, and EOS follows every other token. Each script entry is one ASCII character (its
    byte token) or a token of `added` (non-special added tokens, decoded as their text) or `special`
    (special added tokens, decoded as nothing). The model is scripted by construction: one-hot embeddings
    (dim >= vocab), zero attention and MLP output projections, so the residual at every position is its
    token's embedding, and lm_head rows that give the scripted successor the only large logit. A prompt
    ending with script[0] therefore generates script[1:]; the byte-level tokenizer.json carries the added
    tokens, tokenizer_config.json the chat template. Returns the token ids by text."""
    chars = byte_tokens()[:258]  # the 256 byte tokens, <s>, </s>
    tokens = chars + list(added) + list(special)
    ids = {t: i for i, t in enumerate(tokens)}
    ids.update({chr(b): b for b in range(128)})  # ASCII characters name their byte tokens
    vocab = len(tokens)
    dim = (vocab + 15) // 16 * 16
    successor = {}
    for a, b in zip(script, script[1:]):
        assert successor.get(ids[a], ids[b]) == ids[b], f"the script needs two successors of {a!r}"
        successor[ids[a]] = ids[b]
    head = np.zeros((vocab, dim), np.float32)
    for i in range(vocab):
        head[successor.get(i, EOS), i] = 20.0
    zeros = lambda *shape: np.zeros(shape, np.float32)
    p = "model.layers.0."
    weights = {"model.embed_tokens.weight": np.eye(vocab, dim, dtype=np.float32),
               p + "input_layernorm.weight": np.ones(dim, np.float32),
               p + "post_attention_layernorm.weight": np.ones(dim, np.float32),
               p + "self_attn.q_proj.weight": zeros(dim, dim), p + "self_attn.k_proj.weight": zeros(dim, dim),
               p + "self_attn.v_proj.weight": zeros(dim, dim), p + "self_attn.o_proj.weight": zeros(dim, dim),
               p + "mlp.gate_proj.weight": zeros(16, dim), p + "mlp.up_proj.weight": zeros(16, dim),
               p + "mlp.down_proj.weight": zeros(dim, 16),
               "model.norm.weight": np.ones(dim, np.float32), "lm_head.weight": head}
    os.makedirs(directory, exist_ok=True)
    config = dict(BASE, model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=dim,
                  intermediate_size=16, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1,
                  vocab_size=vocab, max_position_embeddings=512, torch_dtype="float32")
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(directory, "model.safetensors"), weights)
    added_ids = {BOS: True, EOS: True}
    added_ids.update({ids[t]: False for t in added})
    added_ids.update({ids[t]: True for t in special})
    write_tokenizer(directory, tokens, added_ids, [], chat_template)
    return ids
