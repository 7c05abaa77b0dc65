"""Seeded random-weight tiny models of the hybrid families (hybrid_reference.py: Qwen3.5 dense and MoE, Qwen3-Next,
LFM2, Granite 4.0-H dense and MoE, Nemotron-H), written as Hugging Face directories (config.json, model.safetensors
written with numpy, the byte-level tokenizer of tiny_models.py) and, with the same weights, as GGUF files the way
llama.cpp's converter writes them (conversion/qwen.py, lfm2.py, granite.py, nemotron.py, mamba.py: its renames, its
transforms, its metadata keys; tensor names from the gguf package's own TensorNameMap, as the converter maps them).

MODELS names each model: its family, its layout ("multimodal": Qwen3.5's text config in text_config beside a tiny
vision_config, weights under model.language_model., as the Hub ships it; "backbone": Nemotron-H's names), whether it
has a multi-token-prediction head (mtp.fc, its three norms and a layer, which no generation reads) and its config
(the text model's). Configs are as transformers 5 saves them (rope_parameters, layer_types) except where
its save would not be what the Hub ships and llama.cpp's converter reads: Granite's dense model keeps the Hub's
"mamba"/"attention" layer types (its MoE model transformers 5's linear_attention/full_attention), Nemotron-H keeps
hybrid_override_pattern (transformers 5 saves layers_block_type and expert fields that make the converter take it for
nemotron_h_moe) and backbone. tensor names. Weights: Qwen3.5-MoE's experts stacked (mlp.experts.gate_up_proj
(experts, 2 width, dim), gate rows first; down_proj), Qwen3-Next's one per expert and its fused in_proj_qkvz /
in_proj_ba, Granite's block_sparse_moe.input_linear / output_linear / router.layer and shared_mlp.input_linear
(gate rows, up rows), all as the Hub ships them.

Every feature bites: every layer kind appears in each family that has it, conv kernels (3, 4) are shorter than the
test prompts, key heads differ from value heads (Qwen3.5 dense, Qwen3-Next) so the head grouping and the GGUF's
value-head reorder matter, Mamba groups are 2 (Granite dense, Nemotron-H), decays exp(g) and exp(dt A) lie well
inside (0, 1), gates and betas are not saturated, Granite's multipliers are far from 1. dt never falls below
Nemotron-H's clamp (time_step_min 0.001), so a GGUF (which keeps no clamp, as llama.cpp applies none) agrees."""
import json
import os
import random
import zlib

import numpy as np

from tiny_models import BOS, EOS, VOCAB, byte_tokens, permute_for_adjacent_pairs, write_byte_tokenizer, \
    write_safetensors, write_tokenizer

BASE = dict(vocab_size=VOCAB, hidden_size=64, max_position_embeddings=256, bos_token_id=BOS, eos_token_id=EOS,
            hidden_act="silu", dtype="float32")
QWEN_LINEAR = dict(linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
                   linear_num_key_heads=2, rms_norm_eps=1e-6, head_dim=32, num_attention_heads=4,
                   attention_bias=False, tie_word_embeddings=False)
QWEN_ROPE = dict(rope_type="default", rope_theta=100000.0, partial_rotary_factor=0.25)
L, F = "linear_attention", "full_attention"
MODELS = {
    "qwen3_5": dict(family="qwen3_5", layout="multimodal", mtp=True, config=dict(
        QWEN_LINEAR, model_type="qwen3_5_text", intermediate_size=96, num_hidden_layers=4, num_key_value_heads=2,
        linear_num_value_heads=4, layer_types=[L, F, L, F], mtp_num_hidden_layers=1,
        rope_parameters=dict(QWEN_ROPE, mrope_section=[2, 1, 1], mrope_interleaved=True))),
    "qwen3_5_moe": dict(family="qwen3_5_moe", layout="multimodal", config=dict(
        QWEN_LINEAR, model_type="qwen3_5_moe_text", num_hidden_layers=4, num_key_value_heads=1,
        linear_num_value_heads=2, layer_types=[L, L, F, L], num_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=48,
        rope_parameters=dict(QWEN_ROPE, mrope_section=[2, 1, 1], mrope_interleaved=True))),
    "qwen3_next": dict(family="qwen3_next", config=dict(
        QWEN_LINEAR, model_type="qwen3_next", architectures=["Qwen3NextForCausalLM"], intermediate_size=96,
        num_hidden_layers=4, num_key_value_heads=2, linear_num_value_heads=4, layer_types=[L, L, F, L],
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], rope_parameters=QWEN_ROPE)),
    "lfm2": dict(family="lfm2", config=dict(
        model_type="lfm2", architectures=["Lfm2ForCausalLM"], num_hidden_layers=5, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=144, block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0,
        block_multiple_of=32, conv_L_cache=3, conv_bias=False, norm_eps=1e-5, tie_word_embeddings=True,
        layer_types=["conv", F, "conv", "conv", F], full_attn_idxs=[1, 4],
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    "granite_h": dict(family="granitemoehybrid", config=dict(
        model_type="granitemoehybrid", architectures=["GraniteMoeHybridForCausalLM"], num_hidden_layers=4,
        layer_types=["mamba", "attention", "mamba", "mamba"], num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=96, shared_intermediate_size=96, num_local_experts=0, num_experts_per_tok=0,
        mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_n_groups=2, mamba_d_conv=4, mamba_expand=2,
        mamba_conv_bias=True, mamba_proj_bias=False, mamba_chunk_size=256, position_embedding_type="nope",
        embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.09, logits_scaling=2.5,
        rms_norm_eps=1e-5, tie_word_embeddings=True, rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    "granite_h_moe": dict(family="granitemoehybrid", config=dict(
        model_type="granitemoehybrid", architectures=["GraniteMoeHybridForCausalLM"], num_hidden_layers=5,
        layer_types=[L, L, F, L, F], num_attention_heads=4, num_key_value_heads=1, intermediate_size=32,
        shared_intermediate_size=64, num_local_experts=8, num_experts_per_tok=2, mamba_n_heads=4, mamba_d_head=32,
        mamba_d_state=16, mamba_n_groups=1, mamba_d_conv=3, mamba_expand=2, mamba_conv_bias=True,
        mamba_proj_bias=False, mamba_chunk_size=256, position_embedding_type="nope", embedding_multiplier=2.0,
        residual_multiplier=0.6, attention_multiplier=0.125, logits_scaling=3.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False, rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    "nemotron_h": dict(family="nemotron_h", layout="backbone", config=dict(
        model_type="nemotron_h", architectures=["NemotronHForCausalLM"], hybrid_override_pattern="M-*-M-",
        num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=128,
        mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=16, n_groups=2, conv_kernel=4, expand=2,
        mamba_hidden_act="silu", mlp_hidden_act="relu2", layer_norm_epsilon=1e-5, use_conv_bias=True,
        use_bias=False, mlp_bias=False, attention_bias=False, time_step_min=0.001, time_step_max=0.1,
        chunk_size=128, residual_in_fp32=False, tie_word_embeddings=False)),
}
GGUF_ARCH = {"qwen3_5": "QWEN35", "qwen3_5_moe": "QWEN35MOE", "qwen3_next": "QWEN3NEXT", "lfm2": "LFM2",
             "granitemoehybrid": "GRANITE_HYBRID", "nemotron_h": "NEMOTRON_H"}
ROUTER_SCALE = 4.0
LEGACY_TYPES = {"mamba": L, "attention": F}


def config_of(name, spec=None):
    """BASE with the config of MODELS[name] (or of spec, a row of MODELS' form for a model defined elsewhere, e.g.
    tools/make_random_gguf.py's real shapes)."""
    c = dict(BASE)
    c.update((spec or MODELS[name])["config"])
    return c


def layer_types(c):
    """Each layer's type, transformers 5's names (Nemotron-H's pattern: M, *, -)."""
    if "hybrid_override_pattern" in c:
        return [{"M": L, "*": F, "-": "mlp"}[ch] for ch in c["hybrid_override_pattern"]]
    return [LEGACY_TYPES.get(t, t) for t in c["layer_types"]]


def lfm2_ffn_width(c):
    """LFM2's feed-forward width (Lfm2MLP; the converter's _add_feed_forward_length)."""
    width = c["intermediate_size"]
    if c.get("block_auto_adjust_ff_dim"):
        width = int(c.get("block_ffn_dim_multiplier", 1.0) * int(2 * width / 3))
        width = c["block_multiple_of"] * ((width + c["block_multiple_of"] - 1) // c["block_multiple_of"])
    return width


class Draw:
    """Seeded tensors: linear maps scaled to keep unit variance (as matrix_dtype), norms, vectors (float32)."""

    def __init__(self, name, matrix_dtype=np.float32):
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.matrix_dtype = matrix_dtype

    def linear(self, out, inp, scale=1.0):
        return (self.rng.uniform(-1, 1, (out, inp)) * np.sqrt(3.0 / inp) * scale).astype(self.matrix_dtype)

    def vector(self, n, lo, hi):
        return self.rng.uniform(lo, hi, n).astype(np.float32)

    def norm(self, n, centre=1.0):  # the definition's w: near 1 for x * w, near 0 for Qwen's x * (1 + w)
        return self.vector(n, centre - 0.4, centre + 0.4)

    def conv(self, channels, kernel):  # (channels, 1, kernel) as nn.Conv1d holds it
        return (self.rng.uniform(-1, 1, (channels, 1, kernel)) * np.sqrt(3.0 / kernel)).astype(np.float32)


def attention_weights(w, p, c, draw, gate=False, qk_norm=None, names=("q_proj", "k_proj", "v_proj", "o_proj")):
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    q_rows = c["num_attention_heads"] * hd
    dim, kv = c["hidden_size"], c["num_key_value_heads"] * hd
    key_scale = 3.0 if qk_norm else 1.0  # keys the norm rescales: without it, sharper attention
    for name, rows, scale in zip(names[:3], ((2 if gate else 1) * q_rows, kv, kv), (1.0, key_scale, 1.0)):
        w[p + name + ".weight"] = draw.linear(rows, dim, scale)
    w[p + names[3] + ".weight"] = draw.linear(dim, q_rows)
    if qk_norm:
        centre = 0.0 if gate else 1.0  # Qwen's norms are zero-centred
        w[p + qk_norm[0]], w[p + qk_norm[1]] = draw.norm(hd, centre), draw.norm(hd, centre)


def deltanet_weights(w, p, c, draw):
    """Qwen3.5's linear_attn tensors; Qwen3-Next's in_proj_qkvz / in_proj_ba hold the same rows per key head."""
    dim, nk, nv = c["hidden_size"], c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, r = c["linear_key_head_dim"], c["linear_value_head_dim"], nv // nk
    qkv, z = draw.linear(2 * nk * dk + nv * dv, dim), draw.linear(nv * dv, dim)
    b, a = draw.linear(nv, dim), draw.linear(nv, dim, scale=0.5)
    if c["model_type"] == "qwen3_next":  # per key head [q, k, v (r heads), z (r heads)] and [b (r), a (r)]
        q, k, v = np.split(qkv, [nk * dk, 2 * nk * dk])
        groups = [x.reshape(nk, -1, dim) for x in (q, k, v, z)]
        w[p + "in_proj_qkvz.weight"] = np.concatenate(groups, axis=1).reshape(-1, dim)
        ba = np.concatenate([b.reshape(nk, r, dim), a.reshape(nk, r, dim)], axis=1)
        w[p + "in_proj_ba.weight"] = ba.reshape(-1, dim)
    else:
        w[p + "in_proj_qkv.weight"], w[p + "in_proj_z.weight"] = qkv, z
        w[p + "in_proj_b.weight"], w[p + "in_proj_a.weight"] = b, a
    w[p + "conv1d.weight"] = draw.conv(2 * nk * dk + nv * dv, c["linear_conv_kernel_dim"])
    w[p + "dt_bias"] = draw.vector(nv, -1.0, 1.0)
    w[p + "A_log"] = np.log(draw.vector(nv, 0.05, 0.6))  # exp(g) in about (0.65, 0.97)
    w[p + "norm.weight"] = draw.norm(dv)
    w[p + "out_proj.weight"] = draw.linear(dim, nv * dv)


def mamba_sizes(c):
    """(heads, head dim, state, groups, conv kernel) of Granite's or Nemotron-H's config."""
    if "mamba_n_heads" in c:
        return c["mamba_n_heads"], c["mamba_d_head"], c["mamba_d_state"], c["mamba_n_groups"], c["mamba_d_conv"]
    return c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"], c["n_groups"], c["conv_kernel"]


def mamba_weights(w, p, c, draw):
    heads, head_dim, state, groups, kernel = mamba_sizes(c)
    dim, inner = c["hidden_size"], heads * head_dim
    conv = inner + 2 * groups * state
    w[p + "in_proj.weight"] = np.concatenate([draw.linear(inner + conv, dim), draw.linear(heads, dim, scale=0.5)])
    w[p + "conv1d.weight"], w[p + "conv1d.bias"] = draw.conv(conv, kernel), draw.vector(conv, -0.3, 0.3)
    w[p + "dt_bias"] = draw.vector(heads, -2.5, -0.5)  # dt = softplus(dt + dt_bias) in about (0.02, 1)
    w[p + "A_log"] = np.log(draw.vector(heads, 0.5, 3.0))
    w[p + "D"] = draw.vector(heads, 0.5, 1.5)
    w[p + "norm.weight"] = draw.norm(inner)
    w[p + "out_proj.weight"] = draw.linear(dim, inner)


def shortconv_weights(w, p, c, draw):
    dim = c["hidden_size"]
    w[p + "in_proj.weight"], w[p + "out_proj.weight"] = draw.linear(3 * dim, dim), draw.linear(dim, dim)
    w[p + "conv.weight"] = draw.conv(dim, c["conv_L_cache"])


def glu_weights(w, p, dim, width, draw, names=("gate_proj", "up_proj", "down_proj")):
    w[p + names[0] + ".weight"], w[p + names[1] + ".weight"] = draw.linear(width, dim), draw.linear(width, dim)
    w[p + names[2] + ".weight"] = draw.linear(dim, width)


def qwen_moe_weights(w, p, c, draw):
    """Router, experts (stacked for Qwen3.5-MoE, one per expert for Qwen3-Next), the shared expert and its gate."""
    dim, n, width = c["hidden_size"], c["num_experts"], c["moe_intermediate_size"]
    w[p + "gate.weight"] = draw.linear(n, dim, scale=ROUTER_SCALE)
    gate_up = np.stack([draw.linear(2 * width, dim) for _ in range(n)])
    down = np.stack([draw.linear(dim, width) for _ in range(n)])
    if c["model_type"] == "qwen3_next":
        for e in range(n):
            w[f"{p}experts.{e}.gate_proj.weight"], w[f"{p}experts.{e}.up_proj.weight"] = np.split(gate_up[e], 2)
            w[f"{p}experts.{e}.down_proj.weight"] = down[e]
    else:
        w[p + "experts.gate_up_proj"], w[p + "experts.down_proj"] = gate_up, down
    glu_weights(w, p + "shared_expert.", dim, c["shared_expert_intermediate_size"], draw)
    w[p + "shared_expert_gate.weight"] = draw.linear(1, dim, scale=2.0)


def granite_ffn_weights(w, p, c, draw):
    dim, shared = c["hidden_size"], c["shared_intermediate_size"]
    w[p + "shared_mlp.input_linear.weight"] = draw.linear(2 * shared, dim)
    w[p + "shared_mlp.output_linear.weight"] = draw.linear(dim, shared)
    n, width = c["num_local_experts"], c["intermediate_size"]
    if n:
        w[p + "block_sparse_moe.router.layer.weight"] = draw.linear(n, dim, scale=ROUTER_SCALE)
        w[p + "block_sparse_moe.input_linear.weight"] = np.stack([draw.linear(2 * width, dim) for _ in range(n)])
        w[p + "block_sparse_moe.output_linear.weight"] = np.stack([draw.linear(dim, width) for _ in range(n)])


def qwen_layer(w, p, c, draw, kind):
    w[p + "input_layernorm.weight"] = draw.norm(c["hidden_size"], 0.0)
    if kind == L:
        deltanet_weights(w, p + "linear_attn.", c, draw)
    else:
        attention_weights(w, p + "self_attn.", c, draw, gate=True, qk_norm=("q_norm.weight", "k_norm.weight"))
    w[p + "post_attention_layernorm.weight"] = draw.norm(c["hidden_size"], 0.0)
    if "num_experts" in c:
        qwen_moe_weights(w, p + "mlp.", c, draw)
    else:
        glu_weights(w, p + "mlp.", c["hidden_size"], c["intermediate_size"], draw)


def layer_weights(w, p, c, draw, kind):
    """One layer's HF-named tensors (after the prefix p) of a layer of type `kind`."""
    dim, family = c["hidden_size"], c["model_type"]
    if family.startswith("qwen"):
        return qwen_layer(w, p, c, draw, kind)
    if family == "lfm2":
        w[p + "operator_norm.weight"], w[p + "ffn_norm.weight"] = draw.norm(dim), draw.norm(dim)
        if kind == "conv":
            shortconv_weights(w, p + "conv.", c, draw)
        else:
            attention_weights(w, p + "self_attn.", c, draw, qk_norm=("q_layernorm.weight", "k_layernorm.weight"),
                              names=("q_proj", "k_proj", "v_proj", "out_proj"))
        return glu_weights(w, p + "feed_forward.", dim, lfm2_ffn_width(c), draw, names=("w1", "w3", "w2"))
    if family == "granitemoehybrid":
        w[p + "input_layernorm.weight"], w[p + "post_attention_layernorm.weight"] = draw.norm(dim), draw.norm(dim)
        (mamba_weights if kind == L else attention_weights)(w, p + ("mamba." if kind == L else "self_attn."), c, draw)
        return granite_ffn_weights(w, p, c, draw)
    w[p + "norm.weight"] = draw.norm(dim)  # Nemotron-H: one mixer per layer
    if kind == L:
        mamba_weights(w, p + "mixer.", c, draw)
    elif kind == F:
        attention_weights(w, p + "mixer.", c, draw)
    else:
        w[p + "mixer.up_proj.weight"] = draw.linear(c["intermediate_size"], dim)
        w[p + "mixer.down_proj.weight"] = draw.linear(dim, c["intermediate_size"], scale=0.5)


def random_weights(name, spec=None, matrix_dtype=np.float32):
    """HF-named float32 tensors of the tiny model `name`, with the prefixes its directory uses, seeded by the name;
    spec as in config_of; matrix_dtype the linear maps' and the embedding's type (np.float16 halves a real shape's
    memory)."""
    spec = spec or MODELS[name]
    c = config_of(name, spec)
    draw = Draw(name, matrix_dtype)
    vocab = c["vocab_size"]
    layout = spec.get("layout")
    prefix = {"multimodal": "model.language_model.", "backbone": "backbone."}.get(layout, "model.")
    dim, zero_centred = c["hidden_size"], c["model_type"].startswith("qwen")
    # Embeddings small enough that the layers, not the input token, decide the output: a tied head would
    # otherwise mostly echo the input (Granite's multiplier scales them up).
    if c.get("tie_word_embeddings"):
        embed_std = 0.15 / c.get("embedding_multiplier", 1.0)
    else:
        embed_std = 0.35 if c["model_type"] == "granitemoehybrid" else 1.0
    embed_name = "embeddings.weight" if layout == "backbone" else "embed_tokens.weight"
    w = {prefix + embed_name: draw.rng.normal(0, embed_std, (vocab, dim)).astype(matrix_dtype)}
    for i, kind in enumerate(layer_types(c)):
        layer_weights(w, f"{prefix}layers.{i}.", c, draw, kind)
    final = {"lfm2": "embedding_norm.weight", "nemotron_h": "norm_f.weight"}.get(c["model_type"], "norm.weight")
    w[prefix + final] = draw.norm(dim, 0.0 if zero_centred else 1.0)
    if not c.get("tie_word_embeddings"):
        w["lm_head.weight"] = draw.linear(vocab, dim)
    if spec.get("mtp"):  # Qwen3.5's multi-token-prediction head: never part of generation
        w["mtp.fc.weight"] = draw.linear(dim, 2 * dim)
        for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            w[f"mtp.{norm}.weight"] = draw.norm(dim, 0.0)
        qwen_layer(w, "mtp.layers.0.", c, draw, F)
    return w


# ------------------------------------------------------------------------------------------ Hugging Face files
def hf_config(name):
    """config.json's contents: Qwen3.5's text config inside its multimodal one, the others flat."""
    c = config_of(name)
    if MODELS[name].get("layout") != "multimodal":
        return c
    moe = c["model_type"] == "qwen3_5_moe_text"
    vision = dict(model_type="qwen3_5_moe_vision" if moe else "qwen3_5_vision", depth=1, hidden_size=32, num_heads=2,
                  intermediate_size=32, out_hidden_size=c["hidden_size"])
    return dict(architectures=["Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"],
                model_type="qwen3_5_moe" if moe else "qwen3_5", text_config=c, vision_config=vision,
                tie_word_embeddings=c["tie_word_embeddings"], dtype="float32")


def write_hf(directory, name, weights):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(hf_config(name), f, indent=1)
    write_safetensors(os.path.join(directory, "model.safetensors"), weights)
    write_tokenizer(directory, byte_tokens(), {BOS: True, EOS: True}, ["Ġ t"])


# ------------------------------------------------------------------------------------------------------ GGUF
def swap_head_groups(t, axis, a, b, size):
    """The converter's _reorder_v_heads: blocks of `size` along axis viewed as (a, b), written as (b, a)."""
    t = np.moveaxis(t, axis, 0)
    shape = t.shape
    return np.moveaxis(t.reshape(a, b, size, *shape[1:]).swapaxes(0, 1).reshape(shape), 0, axis)


def tile_value_heads(name, t, c):
    """_LinearAttentionVReorderBase.modify_tensors (Qwen3.5): value heads from grouped by key head to tiled."""
    nk, nv, dk, dv = (c[k] for k in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                     "linear_value_head_dim"))
    r, qk = nv // nk, 2 * nk * dk
    if r == 1 or "linear_attn." not in name:
        return t
    if ".in_proj_qkv." in name or ".conv1d" in name:
        return np.concatenate([t[:qk], swap_head_groups(t[qk:], 0, nk, r, dv)])
    if ".in_proj_z." in name:
        return swap_head_groups(t, 0, nk, r, dv)
    if ".in_proj_b." in name or ".in_proj_a." in name or name.endswith((".A_log", ".dt_bias")):
        return swap_head_groups(t, 0, nk, r, 1)
    if ".out_proj." in name:
        return swap_head_groups(t, 1, nk, r, dv)
    return t


MTP_NAMES = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm",
             "norm": "shared_head.norm"}
NEXTN_GGUF = {"eh_proj.weight": "nextn.eh_proj.weight", "enorm.weight": "nextn.enorm.weight",
              "hnorm.weight": "nextn.hnorm.weight", "shared_head.norm.weight": "nextn.shared_head_norm.weight"}


def qwen_tensors(weights, c):
    """(name, tensor) pairs after the Qwen converters' filter_tensors and modify_tensors (_QwenMtpMixin,
    _LinearAttentionVReorderBase, Qwen3NextModel, Qwen2MoeModel): names HF-style, or GGUF names where the converter
    writes them directly (attn_qkv, attn_gate of a fused in_proj_qkvz)."""
    n = c["num_hidden_layers"]
    for name, t in weights.items():
        name = name.replace("language_model.", "")
        if name.startswith("mtp."):
            parts = name.split(".", 3)
            name = f"model.layers.{n + int(parts[2])}.{parts[3]}" if parts[1] == "layers" else \
                f"model.layers.{n}.{MTP_NAMES[parts[1]]}.{parts[2]}"
        if c["model_type"] != "qwen3_next":
            t = tile_value_heads(name, t, c)
        if name.endswith(".A_log"):
            t = -np.exp(t)
        elif name.endswith(".dt_bias"):
            name = name.removesuffix(".dt_bias") + ".dt_proj.bias"
        elif "conv1d" in name:
            t = t.squeeze()
        elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            t = t + np.float32(1.0)
        if name.endswith("in_proj_qkvz.weight"):
            yield from split_qkvz(name, t, c)
        elif name.endswith("mlp.experts.gate_up_proj"):
            base = name.removesuffix(".gate_up_proj")
            gate, up = np.split(t, 2, axis=-2)
            yield base + ".gate_proj.weight", gate
            yield base + ".up_proj.weight", up
        elif name.endswith("mlp.experts.down_proj"):
            yield name + ".weight", t
        elif ".mlp.experts." in name:  # one per expert: stacked once the layer's last one is seen
            layer, e, part = name.split(".mlp.experts.")[0], *name.split(".mlp.experts.")[1].split(".")[:2]
            if int(e) == c["num_experts"] - 1 and part == "down_proj":
                for x in ("gate_proj", "up_proj", "down_proj"):
                    yield f"{layer}.mlp.experts.{x}.weight", np.stack(
                        [weights[f"{layer}.mlp.experts.{j}.{x}.weight"] for j in range(c["num_experts"])])
        else:
            yield name, t


def split_qkvz(name, t, c):
    """Qwen3NextModel: in_proj_qkvz (per key head [q, k, v, z]) as attn_qkv (all q, all k, all v) and attn_gate."""
    nk, r = c["linear_num_key_heads"], c["linear_num_value_heads"] // c["linear_num_key_heads"]
    dk, dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
    q, k, v, z = np.split(t.reshape(nk, -1, t.shape[-1]), [dk, 2 * dk, 2 * dk + r * dv], axis=1)
    bid = name.split(".")[2]
    yield f"blk.{bid}.attn_qkv.weight", np.concatenate([x.reshape(-1, t.shape[-1]) for x in (q, k, v)])
    yield f"blk.{bid}.attn_gate.weight", z.reshape(-1, t.shape[-1])


def mamba_tensors(name, t, c):
    """Mamba2Model.filter_tensors and modify_tensors: dt_bias renamed, conv squeezed, A = -exp(A_log) and D as
    (heads, 1), the gated norm as (groups, inner / groups)."""
    heads, head_dim, _, groups, _ = mamba_sizes(c)
    if name.endswith(".dt_bias"):
        return name.removesuffix(".dt_bias") + ".dt_proj.bias", t
    if "conv1d.weight" in name:
        return name, t.squeeze()
    if name.endswith(".A_log"):
        return name, (-np.exp(t)).reshape(-1, 1)
    if name.endswith(".D"):
        return name, t.reshape(-1, 1)
    if name.endswith("norm.weight") and (".mamba." in name or ".mixer." in name):
        return name, t.reshape(groups, heads * head_dim // groups)
    return name, t


def granite_tensors(weights, c):
    """GraniteHybridModel.modify_tensors (and NemotronHModel's, through it): experts' and shared MLP's
    input_linear split into gate and up; recurrent layers as Mamba2Model; attention q/k rows permuted as
    LlamaModel does; the rest as they are."""
    types, experts = layer_types(c), c.get("num_local_experts", 0)
    for name, t in weights.items():
        bid = int(name.split(".")[2]) if ".layers." in name else None
        if name.endswith("block_sparse_moe.input_linear.weight") or name.endswith("shared_mlp.input_linear.weight"):
            gate, up = np.split(t, 2, axis=-2)
            kind = "exps" if "block_sparse_moe" in name else "shexp" if experts else None
            for part, x in (("gate", gate), ("up", up)):
                yield f"blk.{bid}.ffn_{part}{'_' + kind if kind else ''}.weight", x
        elif name.endswith("shared_mlp.output_linear.weight") and not experts:
            yield f"blk.{bid}.ffn_down.weight", t
        elif bid is not None and types[bid] == L:
            yield mamba_tensors(name, t, c)
        elif bid is not None and types[bid] == F and name.endswith(("q_proj.weight", "k_proj.weight")):
            n_heads = c["num_attention_heads"] if "q_proj" in name else c["num_key_value_heads"]
            yield name, permute_for_adjacent_pairs(t, n_heads)
        else:
            yield name, t


def converted_tensors(family, weights, c):
    if family.startswith("qwen"):
        return qwen_tensors(weights, c)
    if family == "lfm2":  # LFM2Model.modify_tensors: the short conv's kernel squeezed
        return ((n, t.squeeze(1) if "conv.conv" in n else t) for n, t in weights.items())
    return granite_tensors(weights, c)


def qwen_metadata(w, c, arch, n_mtp):
    n = c["num_hidden_layers"]
    hd = c["head_dim"]
    w.add_block_count(n + n_mtp)
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    if "intermediate_size" in c:
        w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_freq_base(c["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    if "num_experts" in c:
        w.add_expert_count(c["num_experts"])
        w.add_expert_used_count(c["num_experts_per_tok"])
        w.add_expert_feed_forward_length(c["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(c["shared_expert_intermediate_size"])
    w.add_ssm_conv_kernel(c["linear_conv_kernel_dim"])
    w.add_ssm_state_size(c["linear_key_head_dim"])
    w.add_ssm_group_count(c["linear_num_key_heads"])
    w.add_ssm_time_step_rank(c["linear_num_value_heads"])
    w.add_ssm_inner_size(c["linear_value_head_dim"] * c["linear_num_value_heads"])
    w.add_array(f"{arch}.attention.recurrent_layers", [t == L for t in layer_types(c)] + [False] * n_mtp)
    w.add_full_attention_interval(c.get("full_attention_interval", 4))
    w.add_rope_dimension_count(int(hd * c["rope_parameters"]["partial_rotary_factor"]))
    if "mrope_section" in c["rope_parameters"]:
        w.add_rope_dimension_sections((c["rope_parameters"]["mrope_section"] + [0] * 4)[:4])
    if n_mtp:
        w.add_nextn_predict_layers(n_mtp)


def lfm2_metadata(w, c, arch, n_mtp):
    w.add_block_count(c["num_hidden_layers"])
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_feed_forward_length(lfm2_ffn_width(c))
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv([c["num_key_value_heads"] if t != "conv" else 0 for t in c["layer_types"]])
    w.add_rope_freq_base(c["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(c["norm_eps"])
    w.add_vocab_size(c["vocab_size"])
    w.add_shortconv_l_cache(c["conv_L_cache"])


def hybrid_metadata(w, c, arch, n_mtp):
    """GraniteHybridModel.set_gguf_parameters (through GraniteMoeModel, GraniteModel, LlamaModel, TextModel) and
    NemotronHModel's additions: per-layer head_count_kv (0: recurrent) and, for Nemotron-H, feed_forward_length
    (the MLP layers' width, 0 elsewhere); the multipliers as attention.scale, embedding_scale, residual_scale,
    logit_scale; rope.scaling.finetuned false (no RoPE in a hybrid)."""
    types, nemotron = layer_types(c), c["model_type"] == "nemotron_h"
    heads, head_dim, state, groups, kernel = mamba_sizes(c)
    w.add_block_count(len(types))
    w.add_context_length(2 ** 20)
    w.add_embedding_length(c["hidden_size"])
    w.add_feed_forward_length([c["intermediate_size"] if t == "mlp" else 0 for t in types] if nemotron
                              else c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv([c["num_key_value_heads"] if t == F else 0 for t in types])
    if nemotron:  # TextModel writes its layer_norm_epsilon as the (non-RMS) norm epsilon; llama.cpp falls back to it
        w.add_layer_norm_eps(c["layer_norm_epsilon"])
        w.add_key_length(c["head_dim"])
        w.add_value_length(c["head_dim"])
    else:
        w.add_rope_freq_base(c["rope_parameters"]["rope_theta"])
        w.add_layer_norm_rms_eps(c["rms_norm_eps"])
        w.add_expert_count(c["num_local_experts"])
        w.add_expert_used_count(c["num_experts_per_tok"])
        w.add_attention_scale(c["attention_multiplier"])
        w.add_embedding_scale(c["embedding_multiplier"])
        w.add_residual_scale(c["residual_multiplier"])
        w.add_logit_scale(c["logits_scaling"])
        w.add_expert_shared_feed_forward_length(c["shared_intermediate_size"])
    w.add_vocab_size(c["vocab_size"])
    w.add_rope_dimension_count(c["hidden_size"] // c["num_attention_heads"])
    w.add_ssm_conv_kernel(kernel)
    w.add_ssm_state_size(state)
    w.add_ssm_group_count(groups)
    w.add_ssm_inner_size(heads * head_dim)
    w.add_ssm_time_step_rank(heads)
    w.add_rope_scaling_finetuned(False)


METADATA = {"qwen3_5": qwen_metadata, "qwen3_5_moe": qwen_metadata, "qwen3_next": qwen_metadata,
            "lfm2": lfm2_metadata, "granitemoehybrid": hybrid_metadata, "nemotron_h": hybrid_metadata}


def write_gguf(path, name, weights, spec=None, tokenizer=write_byte_tokenizer):
    """The GGUF of model `name` (weights: random_weights(name, spec)), as llama.cpp's converter writes it: float32,
    or float16 where random_weights made the matrices float16; spec as in config_of; tokenizer(writer) writes the
    tokenizer keys."""
    import gguf
    spec = spec or MODELS[name]
    c = config_of(name, spec)
    family = spec["family"]
    arch = gguf.MODEL_ARCH[GGUF_ARCH[family]]
    n_mtp = c.get("mtp_num_hidden_layers", 0)
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    METADATA[family](writer, c, gguf.MODEL_ARCH_NAMES[arch], n_mtp)
    tokenizer(writer)
    names = gguf.get_tensor_name_map(arch, len(layer_types(c)) + n_mtp)
    for hf_name, t in converted_tensors(family, weights, c):
        gguf_name = hf_name if hf_name.startswith("blk.") else \
            names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:  # the MTP block's own tensors (the gguf package knows them under newer versions)
            prefix, rest = hf_name.split(".", 3)[2], hf_name.split(".", 3)[3]
            gguf_name = f"blk.{prefix}.{NEXTN_GGUF[rest]}"
        writer.add_tensor(gguf_name, np.ascontiguousarray(t, dtype=np.float16 if t.dtype == np.float16 else np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_model(directory, name):
    """The HF directory directory/name and the GGUF directory/name.gguf of a tiny model; returns their paths."""
    weights = random_weights(name)
    hf_dir = os.path.join(directory, name)
    write_hf(hf_dir, name, weights)
    write_gguf(hf_dir + ".gguf", name, weights)
    return hf_dir, hf_dir + ".gguf"


def shared_prefix_prompts(prefix_len=70):
    """The prefix-caching tests' prompts (test_hybrid_prefix.py, test_gpu_hybrid_prefix.py) and how many share the
    prefix: seven of prefix_len random tokens and a suffix each; one that ends inside the prefix (it saves a
    snapshot a block before the prefix's whole blocks end, so a hit that restored the snapshot a block before
    its end would find one); two that share nothing; and the first cut short 20 tokens past the prefix."""
    rng = random.Random(23)
    prefix = [rng.randrange(3, 256) for _ in range(prefix_len)]
    other = [rng.randrange(3, 256) for _ in range(prefix_len)]
    shared = [prefix + [rng.randrange(3, 256) for _ in range(n)] for n in (30, 9, 3, 17, 22, 12, 26)]
    prompts = [shared[0], prefix[:60]] + shared[1:] + [other + [5, 6, 7], [rng.randrange(3, 256) for _ in range(40)],
                                                       shared[0][:prefix_len + 20]]
    return prompts, len(shared)
