"""An independent float64 numpy forward pass of the hybrid families (recurrent or convolutional layers beside
attention), sharing no code with cbatch, written from Hugging Face's modeling_qwen3_5 / qwen3_5_moe / qwen3_next /
lfm2 / granitemoehybrid / nemotron_h (transformers 5) and driven by one description per family (FAMILIES); one code
path per layer kind, each adding kind(norm(x)) to the residual:
- attention: causal GQA over a per-sequence KV cache; q/k RMSNorm per head (Qwen, LFM2); Qwen's output gate (q_proj
  rows per head [q | gate], output * sigmoid(gate)); partial RoPE (rotate-half over the first head_dim *
  partial_rotary_factor dims: Qwen3.5's multi-axis sections give every axis the same position for text and so reduce
  to it); NoPE (Granite's position_embedding_type other than "rope", Nemotron-H); scale head_dim^-1/2 or Granite's
  attention_multiplier;
- gated DeltaNet (Qwen): in_proj_qkv (q heads, k heads, v heads) through a causal depthwise conv (kernel K, SiLU);
  q, k L2-normalised (x / sqrt(sum x^2 + 1e-6)), q scaled by k_dim^-1/2, key heads repeated to value heads in groups
  (value head j reads key head j // (v_heads / k_heads)); beta = sigmoid(b), decay g = -exp(A_log) softplus(a +
  dt_bias); per token S = S exp(g); S += k (beta (v - k S)); o = q S; then RMSNorm(o) w * silu(z) per value head and
  out_proj. Qwen3-Next's in_proj_qkvz and in_proj_ba hold per key head [q, k, v (ratio heads), z (ratio heads)] and
  [b (ratio), a (ratio)], split here into the Qwen3.5 layout;
- Mamba-2 (Granite, Nemotron-H): in_proj into z (inner), xBC (inner + 2 groups state), dt (heads); xBC through the
  causal conv (with bias, SiLU); dt = softplus(dt + dt_bias) clamped to the config's limits, A = -exp(A_log), B and C
  of group h // (heads / groups); per token S = S exp(dt A) + dt x B; y = S C + D x; then y * silu(z) RMS-normed in
  groups (norm_before_gate false) times w, and out_proj;
- short convolution (LFM2): in_proj into B, C, x; B * x through the causal conv (no activation); C * conv; out_proj;
- feed-forward: SwiGLU; relu^2 MLPs (Nemotron-H's "-" layers, a layer of their own); mixtures of experts (softmax
  router, the top k, renormalised by the rule; Granite's softmax over the top-k logits is that renormalised top k)
  plus a shared expert (Qwen: scaled by sigmoid(shared_expert_gate . x); Granite: its shared_mlp, unscaled).
RMSNorm is x * w, or Qwen's zero-centred x * (1 + w) (not its gated norm, which is x * w). Granite scales the
embeddings, each sublayer's output before the residual add (embedding_, residual_multiplier) and divides the logits
by logits_scaling. Multi-token-prediction layers are not part of generation and are not read.

State: a Sequence holds its length and, per layer, what its mixer keeps (the keys and values; a convolution's window,
the last K - 1 inputs; the recurrent state), so a prompt prefilled in chunks equals one prefilled whole, and decode
steps continue it. Ablations: Model.without(feature) computes as if a feature were missing (features() lists the
model's), what a backend that forgot it would output.

Loaders: a Hugging Face directory (config.json as transformers 5 saves it or as the Hub ships it: Qwen3.5's
text_config, Granite's "mamba"/"attention" layer types, Nemotron-H's hybrid_override_pattern, transformers 5's
{"__float__": "Infinity"} for a non-finite float; weights as shipped (model.language_model., backbone., per-expert
or stacked experts) or as transformers 5 names them), or a GGUF read with the `gguf` package under llama.cpp's
converter (conversion/qwen.py, lfm2.py, granite.py, nemotron.py, mamba.py): zero-centred norms stored as 1 + w (not
ssm_norm); ssm_a = -exp(A_log); ssm_a, ssm_d (heads, 1); ssm_norm (groups, inner / groups); conv weights (channels,
K); dt_bias as ssm_dt.bias; Qwen3.5's value heads reordered from grouped to tiled (undone here); Qwen3-Next's qkvz
split into attn_qkv and attn_gate, ssm_ba kept grouped; Granite's and Nemotron-H's q/k rows permuted as `llama`
files are (undone); layer kinds from attention.recurrent_layers (Qwen), head_count_kv arrays (0: recurrent) and
Nemotron-H's feed_forward_length array (MLP layers); MTP blocks (nextn_predict_layers) skipped. What a GGUF cannot
say, it takes as llama.cpp does: no dt clamps, top-k weights always renormalised. (Over 500 lines: the layer kinds
and both loaders of six families, one description each.)"""
import copy
import json
import os

import numpy as np

from family_reference import agreed_prefix, read_hf_weights, rope, rope_inv_freq, unpermute_adjacent_pairs

__all__ = ["agreed_prefix", "greedy", "load_hf", "load_gguf", "Sequence", "prefill", "logits", "forward"]

QWEN_MIXERS = {"linear_attention": "deltanet", "full_attention": "attention"}
MAMBA_MIXERS = {"linear_attention": "mamba2", "full_attention": "attention"}
# mixers: a config layer type -> the layer kind; ffn: "glu", "moe" (every layer), "qwen" (Qwen's sparse-layer rule),
# "granite" (experts when num_local_experts, else the shared MLP alone), None (MLPs are layers of their own);
# norm_offset: 1 for zero-centred (1 + w) norms; attn_gate, qk_norm: attention options; renorm: top-k weights
# renormalised "always" or per norm_topk_prob ("config"); multipliers: Granite's; partial: the default
# partial_rotary_factor; nope: attention without positions; theta: the default RoPE base. Whether a shared expert
# (and its sigmoid gate) or Qwen3-Next's fused projections are there, the files say.
FAMILIES = {
    "qwen3_5": dict(mixers=QWEN_MIXERS, ffn="glu", norm_offset=1.0, attn_gate=True, qk_norm=True, partial=0.25),
    "qwen3_5_moe": dict(mixers=QWEN_MIXERS, ffn="moe", norm_offset=1.0, attn_gate=True, qk_norm=True, partial=0.25,
                        renorm="always"),
    "qwen3_next": dict(mixers=QWEN_MIXERS, ffn="qwen", norm_offset=1.0, attn_gate=True, qk_norm=True, partial=0.25,
                       renorm="config"),
    "lfm2": dict(mixers={"conv": "shortconv", "full_attention": "attention"}, ffn="glu", qk_norm=True,
                 theta=1000000.0),
    "granitemoehybrid": dict(mixers=MAMBA_MIXERS, ffn="granite", renorm="always", multipliers=True),
    "nemotron_h": dict(mixers=dict(MAMBA_MIXERS, mlp="relu2"), ffn=None, nope=True),
}
HF_MODEL_TYPES = {"qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe"}
GGUF_FAMILIES = {"qwen35": "qwen3_5", "qwen35moe": "qwen3_5_moe", "qwen3next": "qwen3_next", "lfm2": "lfm2",
                 "granitehybrid": "granitemoehybrid", "nemotron_h": "nemotron_h"}
LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention"}  # transformers 5 remaps these
PATTERN_LAYER_TYPES = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}  # Nemotron-H

# Tensors by layer kind: our key -> its name after the layer's prefix. Hugging Face names differ per family.
HF_ATTENTION = dict(q="self_attn.q_proj.weight", k="self_attn.k_proj.weight", v="self_attn.v_proj.weight",
                    o="self_attn.o_proj.weight", q_norm="self_attn.q_norm.weight", k_norm="self_attn.k_norm.weight")
HF_DELTANET = {key: "linear_attn." + name for key, name in dict(
    qkv="in_proj_qkv.weight", z="in_proj_z.weight", b="in_proj_b.weight", a="in_proj_a.weight",
    qkvz="in_proj_qkvz.weight", ba="in_proj_ba.weight", conv="conv1d.weight", dt_bias="dt_bias", A_log="A_log",
    norm="norm.weight", out="out_proj.weight").items()}
MAMBA_NAMES = dict(in_proj="in_proj.weight", in_bias="in_proj.bias", conv="conv1d.weight", conv_bias="conv1d.bias",
                   dt_bias="dt_bias", A_log="A_log", D="D", norm="norm.weight", out="out_proj.weight",
                   out_bias="out_proj.bias")
QWEN_MOE = dict(router="mlp.gate.weight", experts="mlp.experts.", sh_gate="mlp.shared_expert.gate_proj.weight",
                sh_up="mlp.shared_expert.up_proj.weight", sh_down="mlp.shared_expert.down_proj.weight",
                sh_router="mlp.shared_expert_gate.weight")
QWEN_NAMES = dict(norms=("input_layernorm.weight", "post_attention_layernorm.weight"), attention=HF_ATTENTION,
                  deltanet=HF_DELTANET, moe=QWEN_MOE,
                  glu=dict(gate="mlp.gate_proj.weight", up="mlp.up_proj.weight", down="mlp.down_proj.weight"))
HF_NAMES = {
    "qwen": QWEN_NAMES,
    "lfm2": dict(norms=("operator_norm.weight", "ffn_norm.weight"),
                 attention=dict(HF_ATTENTION, o="self_attn.out_proj.weight", q_norm="self_attn.q_layernorm.weight",
                                k_norm="self_attn.k_layernorm.weight"),
                 shortconv=dict(in_proj="conv.in_proj.weight", in_bias="conv.in_proj.bias", conv="conv.conv.weight",
                                conv_bias="conv.conv.bias", out="conv.out_proj.weight", out_bias="conv.out_proj.bias"),
                 glu=dict(gate="feed_forward.w1.weight", up="feed_forward.w3.weight", down="feed_forward.w2.weight")),
    "granitemoehybrid": dict(norms=("input_layernorm.weight", "post_attention_layernorm.weight"),
                             attention=HF_ATTENTION, mamba2={k: "mamba." + n for k, n in MAMBA_NAMES.items()}),
    "nemotron_h": dict(norms=("norm.weight",), attention={k: n.replace("self_attn.", "mixer.")
                                                          for k, n in HF_ATTENTION.items()},
                       mamba2={k: "mixer." + n for k, n in MAMBA_NAMES.items()},
                       relu2=dict(up="mixer.up_proj.weight", down="mixer.down_proj.weight")),
}
GGUF_NAMES = dict(
    attention=dict(q="attn_q.weight", k="attn_k.weight", v="attn_v.weight", o="attn_output.weight",
                   q_norm="attn_q_norm.weight", k_norm="attn_k_norm.weight"),
    deltanet=dict(qkv="attn_qkv.weight", z="attn_gate.weight", b="ssm_beta.weight", a="ssm_alpha.weight",
                  ba="ssm_ba.weight", conv="ssm_conv1d.weight", dt_bias="ssm_dt.bias", A="ssm_a",
                  norm="ssm_norm.weight", out="ssm_out.weight"),
    mamba2=dict(in_proj="ssm_in.weight", conv="ssm_conv1d.weight", conv_bias="ssm_conv1d.bias", dt_bias="ssm_dt.bias",
                A="ssm_a", D="ssm_d", norm="ssm_norm.weight", out="ssm_out.weight"),
    shortconv=dict(in_proj="shortconv.in_proj.weight", conv="shortconv.conv.weight", out="shortconv.out_proj.weight"),
    glu=dict(gate="ffn_gate.weight", up="ffn_up.weight", down="ffn_down.weight"),
    relu2=dict(up="ffn_up.weight", down="ffn_down.weight"),
    moe=dict(router="ffn_gate_inp.weight", exp_gate="ffn_gate_exps.weight", exp_up="ffn_up_exps.weight",
             exp_down="ffn_down_exps.weight", sh_gate="ffn_gate_shexp.weight", sh_up="ffn_up_shexp.weight",
             sh_down="ffn_down_shexp.weight", sh_router="ffn_gate_inp_shexp.weight"))
GGUF_FFN_NORM = {"qwen3_5": "post_attention_norm.weight", "qwen3_5_moe": "post_attention_norm.weight",
                 "qwen3_next": "post_attention_norm.weight"}  # the others: ffn_norm.weight
# The tensors a layer kind cannot do without (the others are optional: biases, q/k norms, a shared expert).
REQUIRED = dict(attention=("q", "k", "v", "o"), deltanet=("qkv", "z", "b", "a", "conv", "dt_bias", "A", "norm", "out"),
                mamba2=("in_proj", "conv", "dt_bias", "A", "D", "norm", "out"), shortconv=("in_proj", "conv", "out"),
                glu=("gate", "up", "down"), relu2=("up", "down"), moe=("router", "exp_gate", "exp_up", "exp_down"))


class Model:
    """The description of one model and its float64 weights in Hugging Face's layout: layers[i] is a list of
    (norm weight, kind, tensors) sublayers; attn, deltanet, mamba, moe hold the kinds' sizes and options."""

    def __init__(self, family, d):
        self.family, self.spec = family, FAMILIES[family]
        self.dim, self.eps = d["dim"], d["eps"]
        self.norm_offset = self.spec.get("norm_offset", 0.0)
        self.embed_scale, self.residual_scale = d.get("embed_scale", 1.0), d.get("residual_scale", 1.0)
        self.logit_divisor = d.get("logit_divisor", 1.0)
        self.attn = d["attn"]          # n_heads, n_kv, head_dim, scale, theta, rope_dims (0: NoPE)
        self.deltanet = d.get("deltanet")  # k_heads, v_heads, k_dim, v_dim
        self.mamba = d.get("mamba")    # heads, head_dim, state, groups, dt_limit (low, high)
        self.moe = d.get("moe")        # top_k, renorm
        self.off = frozenset()         # ablated features (without())
        self.embedding = self.head = self.final_norm = None
        self.layers = []

    def kinds(self):
        return {kind for layer in self.layers for _, kind, _ in layer}

    def features(self):
        """The features of this model whose absence without() can simulate."""
        kinds, a, out = self.kinds(), self.attn, []
        if self.norm_offset:
            out.append("norm_offset")
        if "attention" in kinds:
            out += ["attn_gate"] if self.spec.get("attn_gate") else []
            out += ["qk_norm"] if self.spec.get("qk_norm") else []
            out += ["nope"] if not a["rope_dims"] else ["partial_rotary"] if a["rope_dims"] < a["head_dim"] else []
            out += ["attention_multiplier"] if a["scale"] != a["head_dim"] ** -0.5 else []
        if kinds & {"deltanet", "mamba2", "shortconv"}:
            out += ["conv_window", "conv_carry"]
        if kinds & {"deltanet", "mamba2"}:
            out += ["decay", "dt_bias", "state_carry", "gated_norm", "gate_order"]
        if "deltanet" in kinds:
            out += ["l2_norm", "beta"]
            out += ["head_order"] if self.deltanet["v_heads"] != self.deltanet["k_heads"] else []
        if "mamba2" in kinds:
            out += ["d_skip"] + (["norm_groups"] if self.mamba["groups"] > 1 else [])
        if "shortconv" in kinds:
            out += ["b_gate", "c_gate"]
        if "relu2" in kinds:
            out.append("relu2")
        if "moe" in kinds:
            out.append("moe_renorm")
            shared = [t for layer in self.layers for _, kind, t in layer if kind == "moe" and t["sh_down"] is not None]
            out += ["shared_expert"] if shared else []
            out += ["shared_gate"] if shared and shared[0]["sh_router"] is not None else []
        out += [f for f, on in (("embedding_multiplier", self.embed_scale != 1.0),
                                ("residual_multiplier", self.residual_scale != 1.0),
                                ("logits_scaling", self.logit_divisor != 1.0)) if on]
        return out

    def without(self, feature):
        """A copy computing as if `feature` were missing (the layer kinds read self.off)."""
        assert feature in self.features(), f"{self.family} has no feature {feature}"
        m = copy.copy(self)
        m.off = self.off | {feature}
        return m


# ------------------------------------------------------------------------------------------------ layer kinds
def linear(x, w, bias=None):
    return x @ w.T + (bias if bias is not None else 0.0)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def softplus(x):
    return np.logaddexp(0.0, x)


def rms_norm(m, x, w):
    """RMSNorm over the last axis: x * (offset + w), offset the family's (0, or 1 for zero-centred norms)."""
    offset = 0.0 if "norm_offset" in m.off else m.norm_offset
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + m.eps) * (offset + w)


def gated_norm(m, y, z, w, group, gate_first):
    """The recurrent layers' output norm, RMS over groups of `group` values, weight w (no offset): DeltaNet norms
    then gates (RMSNorm(y) w silu(z)), Mamba-2 gates then norms (RMSNorm(y silu(z)) w: norm_before_gate false)."""
    gate_first = gate_first != ("gate_order" in m.off)
    gate = np.ones_like(z) if "gated_norm" in m.off else silu(z)
    if gate_first:
        y = y * gate
    if "norm_groups" in m.off:
        group = y.shape[-1]
    g = y.reshape(y.shape[0], -1, group)
    y = (g / np.sqrt(np.mean(g * g, axis=-1, keepdims=True) + m.eps)).reshape(y.shape) * w
    return y if gate_first else y * gate


def causal_conv(m, state, x, w, bias, activate):
    """The depthwise causal convolution of rows x (T, channels), kernel w (channels, K): output t is
    sum_j w[:, j] x[t + j - K + 1], earlier rows coming from the window state["window"] (K - 1, channels) of the
    previous calls (zeros at the start), which is updated."""
    width = w.shape[1] - 1
    window = state.get("window")
    if window is None or "conv_carry" in m.off:
        window = np.zeros((width, x.shape[1]))
    rows = np.concatenate([window, x])
    state["window"] = rows[len(rows) - width:]
    if "conv_window" in m.off:  # the current row's tap alone
        out = x * w[:, -1]
    else:
        out = sum(rows[j:j + len(x)] * w[:, j] for j in range(width + 1))
    out = out + (bias if bias is not None else 0.0)
    return silu(out) if activate else out


def rope_dims(m):
    """(rotated dims, inverse frequencies) of the attention layers; 0 dims for NoPE."""
    a = m.attn
    dims = a["head_dim"] if (not a["rope_dims"] and "nope" in m.off) or "partial_rotary" in m.off else a["rope_dims"]
    return dims, rope_inv_freq(dims, a["theta"], None) if dims else None


def attention(m, t, h, state, positions):
    a, n = m.attn, len(h)
    hd = a["head_dim"]
    q = linear(h, t["q"]).reshape(n, a["n_heads"], -1)
    gate = None
    if m.spec.get("attn_gate"):  # per head [q | gate]
        q, gate = q[..., :hd], q[..., hd:].reshape(n, -1)
    k = linear(h, t["k"]).reshape(n, a["n_kv"], hd)
    v = linear(h, t["v"]).reshape(n, a["n_kv"], hd)
    if t["q_norm"] is not None and "qk_norm" not in m.off:
        q, k = rms_norm(m, q, t["q_norm"]), rms_norm(m, k, t["k_norm"])
    dims, inv_freq = rope_dims(m)
    if dims:
        q = np.concatenate([rope(q[..., :dims], positions, inv_freq), q[..., dims:]], axis=-1)
        k = np.concatenate([rope(k[..., :dims], positions, inv_freq), k[..., dims:]], axis=-1)
    state["k"] = k if "k" not in state else np.concatenate([state["k"], k])
    state["v"] = v if "v" not in state else np.concatenate([state["v"], v])
    group = a["n_heads"] // a["n_kv"]
    keys, values = np.repeat(state["k"], group, axis=1), np.repeat(state["v"], group, axis=1)
    scale = hd ** -0.5 if "attention_multiplier" in m.off else a["scale"]
    s = (q.transpose(1, 0, 2) @ keys.transpose(1, 2, 0)) * scale  # (heads, T, keys)
    s = np.where(np.arange(len(keys))[None, None, :] > positions[None, :, None], -np.inf, s)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    out = (s @ values.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(n, -1)
    if gate is not None and "attn_gate" not in m.off:
        out = out * sigmoid(gate)
    return linear(out, t["o"])


def recurrent_state(m, state, shape):
    s = state.get("recurrent")
    return np.zeros(shape) if s is None or "state_carry" in m.off else s


def deltanet(m, t, h, state, positions):
    d, n = m.deltanet, len(h)
    nk, nv, dk, dv = d["k_heads"], d["v_heads"], d["k_dim"], d["v_dim"]
    mixed = causal_conv(m, state, linear(h, t["qkv"]), t["conv"], None, activate=True)
    q, k, v = np.split(mixed, [nk * dk, 2 * nk * dk], axis=1)
    q, k, v = q.reshape(n, nk, dk), k.reshape(n, nk, dk), v.reshape(n, nv, dv)
    if "l2_norm" not in m.off:
        q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + 1e-6)
        k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + 1e-6)
    if "head_order" in m.off:  # value head j reading key head j % k_heads (tiled)
        q, k = np.tile(q, (1, nv // nk, 1)), np.tile(k, (1, nv // nk, 1))
    else:
        q, k = np.repeat(q, nv // nk, axis=1), np.repeat(k, nv // nk, axis=1)
    q = q * dk ** -0.5
    beta = np.ones((n, nv)) if "beta" in m.off else sigmoid(linear(h, t["b"]))
    dt_bias = 0.0 if "dt_bias" in m.off else t["dt_bias"]
    g = np.zeros((n, nv)) if "decay" in m.off else t["A"] * softplus(linear(h, t["a"]) + dt_bias)
    s = recurrent_state(m, state, (nv, dk, dv))
    out = np.empty((n, nv, dv))
    for i in range(n):  # the delta rule, token by token
        s = s * np.exp(g[i])[:, None, None]
        delta = (v[i] - np.einsum("hk,hkv->hv", k[i], s)) * beta[i][:, None]
        s = s + k[i][:, :, None] * delta[:, None, :]
        out[i] = np.einsum("hk,hkv->hv", q[i], s)
    state["recurrent"] = s
    y = gated_norm(m, out.reshape(n, -1), linear(h, t["z"]), np.tile(t["norm"], nv), dv, gate_first=False)
    return linear(y, t["out"])


def mamba2(m, t, h, state, positions):
    c, n = m.mamba, len(h)
    heads, p, ns, groups = c["heads"], c["head_dim"], c["state"], c["groups"]
    inner = heads * p
    z, xbc, dt = np.split(linear(h, t["in_proj"], t["in_bias"]), [inner, 2 * inner + 2 * groups * ns], axis=1)
    xbc = causal_conv(m, state, xbc, t["conv"], t["conv_bias"], activate=True)
    x, b, cc = np.split(xbc, [inner, inner + groups * ns], axis=1)
    x = x.reshape(n, heads, p)
    b = np.repeat(b.reshape(n, groups, ns), heads // groups, axis=1)  # (T, heads, state)
    cc = np.repeat(cc.reshape(n, groups, ns), heads // groups, axis=1)
    dt = np.clip(softplus(dt + (0.0 if "dt_bias" in m.off else t["dt_bias"])), *c["dt_limit"])  # (T, heads)
    decay = np.ones((n, heads)) if "decay" in m.off else np.exp(dt * t["A"])
    d_skip = 0.0 if "d_skip" in m.off else t["D"][:, None]
    s = recurrent_state(m, state, (heads, p, ns))
    y = np.empty((n, heads, p))
    for i in range(n):  # the selective scan, token by token
        s = s * decay[i][:, None, None] + (dt[i][:, None] * x[i])[:, :, None] * b[i][:, None, :]
        y[i] = np.einsum("hpn,hn->hp", s, cc[i]) + d_skip * x[i]
    state["recurrent"] = s
    y = gated_norm(m, y.reshape(n, inner), z, t["norm"], inner // groups, gate_first=True)
    return linear(y, t["out"], t["out_bias"])


def shortconv(m, t, h, state, positions):
    b, c, x = np.split(linear(h, t["in_proj"], t["in_bias"]), 3, axis=1)
    bx = x if "b_gate" in m.off else b * x
    conv = causal_conv(m, state, bx, t["conv"], t["conv_bias"], activate=False)
    return linear(conv if "c_gate" in m.off else c * conv, t["out"], t["out_bias"])


def swiglu(h, gate, up, down):
    return linear(silu(linear(h, gate)) * linear(h, up), down)


def glu(m, t, h, state, positions):
    return swiglu(h, t["gate"], t["up"], t["down"])


def relu2(m, t, h, state, positions):
    up = np.maximum(linear(h, t["up"]), 0.0)
    return linear(up if "relu2" in m.off else up * up, t["down"])


def moe(m, t, h, state, positions):
    """Softmax over the router logits, the top k (renormalised when the rule says), the chosen experts' SwiGLU
    outputs weighted by them, plus the shared expert (times sigmoid(sh_router . h) when it has that gate)."""
    k = m.moe["top_k"]
    router = linear(h, t["router"])
    probs = np.exp(router - router.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    top = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    weights = np.take_along_axis(probs, top, axis=-1)
    if m.moe["renorm"] != ("moe_renorm" in m.off):
        weights /= weights.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    for e in np.unique(top):
        rows, slots = np.nonzero(top == e)
        out[rows] += weights[rows, slots][:, None] * swiglu(h[rows], t["exp_gate"][e], t["exp_up"][e], t["exp_down"][e])
    if t["sh_down"] is not None and "shared_expert" not in m.off:
        shared = swiglu(h, t["sh_gate"], t["sh_up"], t["sh_down"])
        if t["sh_router"] is not None and "shared_gate" not in m.off:
            shared = shared * sigmoid(h @ t["sh_router"])[:, None]
        out += shared
    return out


KINDS = dict(attention=attention, deltanet=deltanet, mamba2=mamba2, shortconv=shortconv, glu=glu, relu2=relu2, moe=moe)


# -------------------------------------------------------------------------------------------------- forward
class Sequence:
    """One sequence's state: its length and, per layer, what its mixer keeps (attention: "k", "v" of every position;
    a convolution: "window", its last K - 1 inputs; DeltaNet and Mamba-2: "recurrent")."""

    def __init__(self, m):
        self.length = 0
        self.state = [{} for _ in m.layers]


def forward(m, tokens, seq):
    """Final hidden states (normed) of a sequence's next tokens, continuing what seq holds (updated)."""
    x = m.embedding[np.asarray(tokens)] * (1.0 if "embedding_multiplier" in m.off else m.embed_scale)
    positions = np.arange(seq.length, seq.length + len(tokens), dtype=np.float64)
    residual_scale = 1.0 if "residual_multiplier" in m.off else m.residual_scale
    for i, layer in enumerate(m.layers):
        for norm, kind, t in layer:
            x = x + residual_scale * KINDS[kind](m, t, rms_norm(m, x, norm), seq.state[i], positions)
    seq.length += len(tokens)
    return rms_norm(m, x, m.final_norm)


def logits(m, hidden):
    out = linear(hidden, m.head)
    return out if "logits_scaling" in m.off else out / m.logit_divisor


def prefill(m, prompt, seq, chunk=None):
    """The last row's final hidden state after feeding `prompt` in chunks of `chunk` tokens (all at once: None)."""
    chunk = chunk or len(prompt)
    for start in range(0, len(prompt), chunk):
        hidden = forward(m, prompt[start:start + chunk], seq)
    return hidden[-1]


def greedy(m, prompts, num_tokens, chunk=None):
    """Per prompt: (generated ids, top-1 minus top-2 logit at each step); each prompt prefilled in chunks of
    `chunk` tokens (whole: None), then decoded a token at a time."""
    results = []
    for prompt in prompts:
        seq = Sequence(m)
        row = logits(m, prefill(m, prompt, seq, chunk))
        ids, margins = [], []
        for step in range(num_tokens):
            top2 = np.partition(row, -2)[-2:]
            ids.append(int(np.argmax(row)))
            margins.append(float(top2[1] - top2[0]))
            if step + 1 < num_tokens:
                row = logits(m, forward(m, [ids[-1]], seq)[-1])
        results.append((ids, margins))
    return results


def greedy_logprobs(m, prompts, num_tokens):
    """Per prompt: (greedy ids, top-1 minus top-2 logit at each step, log-softmax of each chosen id); each prompt
    prefilled whole, then decoded a token at a time."""
    results = []
    for prompt in prompts:
        seq = Sequence(m)
        row = logits(m, prefill(m, prompt, seq))
        ids, margins, logprobs = [], [], []
        for step in range(num_tokens):
            top2 = np.partition(row, -2)[-2:]
            ids.append(int(np.argmax(row)))
            margins.append(float(top2[1] - top2[0]))
            shifted = row - row.max()
            logprobs.append(float(shifted[ids[-1]] - np.log(np.exp(shifted).sum())))
            if step + 1 < num_tokens:
                row = logits(m, forward(m, [ids[-1]], seq)[-1])
        results.append((ids, margins, logprobs))
    return results

# ----------------------------------------------------------------------------------------------- model files
def checked(kind, t, names=None):
    """A layer kind's tensors by our key (None: absent), after checking the required ones are there."""
    missing = [key for key in REQUIRED[kind] if t.get(key) is None]
    if missing:
        raise KeyError(f"{kind} layer without {', '.join((names or {}).get(k, k) for k in missing)}")
    return t


def finish(kind, t):
    """Tensors every layer of a kind has, None when absent; conv kernels (channels, K)."""
    for key in ("q_norm", "k_norm", "in_bias", "conv_bias", "out_bias", "sh_gate", "sh_up", "sh_down", "sh_router"):
        t.setdefault(key, None)
    if t.get("conv") is not None:
        t["conv"] = t["conv"].reshape(t["conv"].shape[0], -1)
    for key in ("A", "D", "norm", "sh_router"):
        if t.get(key) is not None:
            t[key] = t[key].reshape(-1)
    return t


def assemble(m, kinds, read_layer):
    """m.layers from each layer's (mixer kind, ffn kind or None); read_layer(i, kind, is_ffn) -> (norm, tensors)."""
    for i, (mixer, ffn) in enumerate(kinds):
        m.layers.append([(norm, kind, finish(kind, t)) for kind, is_ffn in ((mixer, False), (ffn, True)) if kind
                         for norm, t in [read_layer(i, kind, is_ffn)]])


def ffn_kind(family, c, i):
    rule = FAMILIES[family]["ffn"]
    if rule == "qwen":
        sparse = c.get("num_experts", 0) > 0 and i not in (c.get("mlp_only_layers") or []) and \
            (i + 1) % c.get("decoder_sparse_step", 1) == 0
        return "moe" if sparse else "glu"
    if rule == "granite":
        return "moe" if c.get("num_local_experts", 0) > 0 else "glu"
    return rule


def hf_layer_types(family, c):
    """Each layer's type under transformers 5's names (linear_attention, full_attention, conv, mlp, moe)."""
    if family == "nemotron_h" and c.get("hybrid_override_pattern"):
        return [PATTERN_LAYER_TYPES[ch] for ch in c["hybrid_override_pattern"]]
    types = c.get("layer_types") or c.get("layers_block_type")
    n = c.get("num_hidden_layers")
    if types is None and family == "lfm2":
        full = c.get("full_attn_idxs")
        types = ["full_attention" if full is None or i in full else "conv" for i in range(n)]
    elif types is None and family.startswith("qwen"):
        interval = c.get("full_attention_interval", 4)
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    elif types is None:
        types = ["linear_attention"] * n
    return [LEGACY_LAYER_TYPES.get(t, t) for t in types]


def mixer_kind(family, layer_type):
    kind = FAMILIES[family]["mixers"].get(layer_type)
    if kind is None:
        raise NotImplementedError(f"{family}: layer type {layer_type!r} is not supported by this reference")
    return kind


def hf_description(family, c):
    """The Model description of a Hugging Face config (the text model's)."""
    spec = FAMILIES[family]
    dim, heads = c["hidden_size"], c["num_attention_heads"]
    hd = c.get("head_dim") or dim // heads
    params = c.get("rope_parameters") or {}
    theta = params.get("rope_theta", c.get("rope_theta", spec.get("theta", 10000.0)))
    partial = params.get("partial_rotary_factor", c.get("partial_rotary_factor", spec.get("partial", 1.0)))
    nope = spec.get("nope") or (family == "granitemoehybrid" and c.get("position_embedding_type") != "rope")
    d = dict(dim=dim, eps=c.get("rms_norm_eps", c.get("norm_eps", c.get("layer_norm_epsilon", 1e-6))),
             attn=dict(n_heads=heads, n_kv=c.get("num_key_value_heads") or heads, head_dim=hd, theta=theta,
                       rope_dims=0 if nope else int(hd * partial),
                       scale=c.get("attention_multiplier", 1.0) if spec.get("multipliers") else hd ** -0.5))
    if "linear_key_head_dim" in c:
        d["deltanet"] = dict(k_heads=c["linear_num_key_heads"], v_heads=c["linear_num_value_heads"],
                             k_dim=c["linear_key_head_dim"], v_dim=c["linear_value_head_dim"])
    if family == "granitemoehybrid":
        heads_m = c.get("mamba_n_heads", 128)
        inner = c.get("mamba_expand", 2) * dim
        head_dim = c.get("mamba_d_head", "auto")
        d["mamba"] = dict(heads=heads_m, head_dim=inner // heads_m if head_dim == "auto" else head_dim,
                          state=c.get("mamba_d_state", 256), groups=c.get("mamba_n_groups", 1),
                          dt_limit=tuple(c.get("time_step_limit") or (0.0, float("inf"))))
        d.update(embed_scale=c.get("embedding_multiplier", 1.0), residual_scale=c.get("residual_multiplier", 1.0),
                 logit_divisor=c.get("logits_scaling", 1.0))
    if family == "nemotron_h":  # NemotronHMamba2Mixer clamps dt to (time_step_min, inf)
        d["mamba"] = dict(heads=c.get("mamba_num_heads", 128), head_dim=c.get("mamba_head_dim", 64),
                          state=c.get("ssm_state_size", 128), groups=c.get("n_groups", c.get("mamba_n_groups", 8)),
                          dt_limit=(c.get("time_step_min", c.get("mamba_dt_min", 0.001)), float("inf")))
    experts = c.get("num_experts", c.get("num_local_experts", 0))
    if experts:
        d["moe"] = dict(n_experts=experts, top_k=c["num_experts_per_tok"],
                        renorm=spec.get("renorm") == "always" or c.get("norm_topk_prob", False))
    return d


def hf_prefix(w):
    for prefix in ("model.language_model.", "model.", "backbone."):
        for embedding in ("embed_tokens.weight", "embeddings.weight"):
            if prefix + embedding in w:
                return prefix, prefix + embedding
    raise KeyError("no token embedding (model.embed_tokens.weight or backbone.embeddings.weight)")


def hf_experts(get, p, n_experts):
    """(gate, up, down) stacked (experts, width, dim) and (experts, dim, width): transformers 5's gate_up_proj
    (experts, 2 width, dim; gate rows first) and down_proj, or one tensor per expert as the Hub ships Qwen3-Next."""
    fused = get(p + "gate_up_proj")
    if fused is not None:
        gate, up = np.split(fused, 2, axis=1)
        return gate, up, get(p + "down_proj")
    parts = [np.stack([get(f"{p}{e}.{x}_proj.weight") for e in range(n_experts)]) for x in ("gate", "up", "down")]
    return tuple(parts)


def hf_layer(family, d, get, kind, is_ffn):
    """(norm, tensors) of one sublayer of a Hugging Face layer; get(name) reads a tensor of it or None."""
    names = HF_NAMES["qwen" if family.startswith("qwen") else family]
    norm = get(names["norms"][-1 if is_ffn else 0])
    if family == "granitemoehybrid" and kind in ("glu", "moe"):
        return norm, checked(kind, granite_ffn(get, kind))
    if kind == "moe":
        t = {key: get(name) for key, name in names["moe"].items() if key != "experts"}
        t["exp_gate"], t["exp_up"], t["exp_down"] = hf_experts(get, names["moe"]["experts"], d["moe"]["n_experts"])
        return norm, checked(kind, t, names["moe"])
    t = {key: get(name) for key, name in names[kind].items()}
    if kind == "deltanet" and t["qkvz"] is not None:  # Qwen3-Next: per key head [q, k, v, z] and [b, a]
        split_fused_deltanet(t, d["deltanet"])
    if kind in ("deltanet", "mamba2"):
        t["A"] = -np.exp(t.pop("A_log"))
    return norm, checked(kind, t, names[kind])


def split_fused_deltanet(t, d):
    """Qwen3-Next's in_proj_qkvz (per key head [q, k, v, z]) and in_proj_ba (per key head [b, a]) as Qwen3.5's
    in_proj_qkv (all q, all k, all v), in_proj_z, in_proj_b, in_proj_a; value heads stay in their order."""
    nk, r, dk, dv = d["k_heads"], d["v_heads"] // d["k_heads"], d["k_dim"], d["v_dim"]
    qkvz = t.pop("qkvz").reshape(nk, 2 * dk + 2 * r * dv, -1)
    q, k, v, z = np.split(qkvz, [dk, 2 * dk, 2 * dk + r * dv], axis=1)
    t["qkv"] = np.concatenate([x.reshape(-1, x.shape[-1]) for x in (q, k, v)])
    t["z"] = z.reshape(-1, z.shape[-1])
    split_ba(t, nk, r)


def split_ba(t, nk, r):
    b, a = np.split(t.pop("ba").reshape(nk, 2 * r, -1), 2, axis=1)
    t["b"], t["a"] = b.reshape(nk * r, -1), a.reshape(nk * r, -1)


def granite_ffn(get, kind):
    """Granite's shared_mlp (input_linear: gate rows, then up rows) and, with experts, its router and experts
    (as shipped: block_sparse_moe.input_linear, output_linear, router.layer; or transformers 5's names)."""
    gate, up = np.split(get("shared_mlp.input_linear.weight"), 2)
    down = get("shared_mlp.output_linear.weight")
    if kind == "glu":
        return dict(gate=gate, up=up, down=down)
    p = "block_sparse_moe."
    if get(p + "input_linear.weight") is not None:
        fused, exp_down, router = (get(p + n) for n in ("input_linear.weight", "output_linear.weight",
                                                       "router.layer.weight"))
    else:
        fused, exp_down, router = (get(p + n) for n in ("experts.gate_up_proj", "experts.down_proj", "router.weight"))
    exp_gate, exp_up = np.split(fused, 2, axis=1)
    return dict(router=router, exp_gate=exp_gate, exp_up=exp_up, exp_down=exp_down, sh_gate=gate, sh_up=up,
                sh_down=down)


def tagged_float(obj):
    """transformers 5 saves a non-finite float as {"__float__": "Infinity"} (Granite's time_step_limit)."""
    return float(obj["__float__"]) if set(obj) == {"__float__"} else obj


def load_hf(directory):
    """The Model of a Hugging Face directory (see the file's header)."""
    with open(os.path.join(directory, "config.json")) as f:
        top = json.load(f, object_hook=tagged_float)
    c = top.get("text_config", top)
    family = HF_MODEL_TYPES.get(c.get("model_type"), top["model_type"])
    d = hf_description(family, c)
    types = hf_layer_types(family, c)
    m = Model(family, d)
    w = read_hf_weights(directory)
    prefix, embedding = hf_prefix(w)
    m.embedding = w[embedding]
    m.final_norm = next(w[prefix + n] for n in ("norm.weight", "embedding_norm.weight", "norm_f.weight")
                        if prefix + n in w)
    tied = c.get("tie_word_embeddings", top.get("tie_word_embeddings", family == "lfm2"))
    m.head = w.get("lm_head.weight", m.embedding if tied else None)
    if m.head is None:
        raise KeyError(f"{directory}: untied model without lm_head.weight")
    kinds = [(mixer_kind(family, t), ffn_kind(family, c, i)) for i, t in enumerate(types)]
    assemble(m, kinds, lambda i, kind, is_ffn: hf_layer(family, d, lambda n: w.get(f"{prefix}layers.{i}.{n}"),
                                                         kind, is_ffn))
    return m


# ---------------------------------------------------------------------------------------------------- GGUF
def swap_head_groups(t, axis, a, b, size):
    """Rows (or columns, axis 1) in blocks of `size` viewed as (a, b) blocks, transposed to (b, a): llama.cpp's
    converter turns Qwen3.5's value heads from grouped (k_heads, ratio) to tiled (ratio, k_heads) with a = k_heads;
    a = ratio undoes it."""
    t = np.moveaxis(t, axis, 0)
    shape = t.shape
    t = t.reshape(a, b, size, *shape[1:]).swapaxes(0, 1).reshape(shape)
    return np.moveaxis(t, 0, axis)


def untile_value_heads(t, d):
    """Qwen3.5's DeltaNet tensors with value heads back in Hugging Face's grouped order."""
    nk, nv, dk, dv = d["k_heads"], d["v_heads"], d["k_dim"], d["v_dim"]
    r = nv // nk
    if r == 1:
        return
    qk = 2 * nk * dk
    t["qkv"] = np.concatenate([t["qkv"][:qk], swap_head_groups(t["qkv"][qk:], 0, r, nk, dv)])
    t["conv"] = np.concatenate([t["conv"][:qk], swap_head_groups(t["conv"][qk:], 0, r, nk, dv)])
    t["z"] = swap_head_groups(t["z"], 0, r, nk, dv)
    t["out"] = swap_head_groups(t["out"], 1, r, nk, dv)
    for key in ("b", "a"):
        t[key] = swap_head_groups(t[key], 0, r, nk, 1)
    for key in ("A", "dt_bias"):
        t[key] = swap_head_groups(t[key].reshape(-1, 1), 0, r, nk, 1).reshape(-1)


def per_layer(value, n):
    return list(value) if isinstance(value, (list, tuple)) else [value] * n


def gguf_kinds(family, kv, tensors, n):
    """Each layer's (mixer kind, ffn kind) as llama.cpp reads a file of the family."""
    kv_heads = per_layer(kv.get("attention.head_count_kv", 0), n)
    has = lambda i, name: f"blk.{i}.{name}" in tensors  # noqa: E731
    if family.startswith("qwen"):
        recurrent = kv.get("attention.recurrent_layers")
        interval = kv.get("full_attention_interval", 4)
        mixers = ["deltanet" if (recurrent[i] if recurrent is not None else (i + 1) % interval) else "attention"
                  for i in range(n)]
    elif family == "nemotron_h":
        ff = per_layer(kv.get("feed_forward_length", 0), n)
        mixers = ["attention" if kv_heads[i] else "relu2" if ff[i] else "mamba2" for i in range(n)]
    else:
        mixers = ["attention" if kv_heads[i] else ("shortconv" if family == "lfm2" else "mamba2") for i in range(n)]
    if family == "nemotron_h":
        return [(mixer, None) for mixer in mixers]
    return [(mixer, "moe" if has(i, "ffn_gate_inp.weight") else "glu") for i, mixer in enumerate(mixers)]


def gguf_description(family, kv, n):
    heads = kv["attention.head_count"]
    dim = kv["embedding_length"]
    hd = kv.get("attention.key_length", dim // heads)
    kv_heads = [h for h in per_layer(kv.get("attention.head_count_kv", heads), n) if h] or [heads]
    nope = FAMILIES[family].get("nope") or not kv.get("rope.scaling.finetuned", True)
    d = dict(dim=dim, eps=kv.get("attention.layer_norm_rms_epsilon", kv.get("attention.layer_norm_epsilon", 1e-6)),
             attn=dict(n_heads=heads, n_kv=kv_heads[0], head_dim=hd, theta=kv.get("rope.freq_base", 10000.0),
                       rope_dims=0 if nope else kv.get("rope.dimension_count", hd),
                       scale=kv.get("attention.scale") or hd ** -0.5),
             embed_scale=kv.get("embedding_scale", 1.0), residual_scale=kv.get("residual_scale", 1.0),
             logit_divisor=kv.get("logit_scale", 1.0))
    if "ssm.state_size" in kv:
        inner, ranks = kv["ssm.inner_size"], kv["ssm.time_step_rank"]
        if family.startswith("qwen"):
            d["deltanet"] = dict(k_heads=kv["ssm.group_count"], v_heads=ranks, k_dim=kv["ssm.state_size"],
                                 v_dim=inner // ranks)
        else:  # llama.cpp clamps no dt
            d["mamba"] = dict(heads=ranks, head_dim=inner // ranks, state=kv["ssm.state_size"],
                              groups=kv["ssm.group_count"], dt_limit=(0.0, float("inf")))
    if kv.get("expert_count"):  # llama.cpp renormalises the top k of every family here
        d["moe"] = dict(n_experts=kv["expert_count"], top_k=kv["expert_used_count"], renorm=True)
    return d


def load_gguf(path):
    """The Model of a GGUF file, under llama.cpp's conventions (see the file's header)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    reader = GGUFReader(path)
    arch = reader.fields["general.architecture"].contents()
    kv = {k[len(arch) + 1:]: f.contents() for k, f in reader.fields.items() if k.startswith(arch + ".")}
    tensors = {t.name: t for t in reader.tensors}
    family = GGUF_FAMILIES[arch]
    n = kv["block_count"] - kv.get("nextn_predict_layers", 0)
    d = gguf_description(family, kv, n)
    m = Model(family, d)
    offset = FAMILIES[family].get("norm_offset", 0.0)

    def get(name):
        t = tensors.get(name)
        if t is None:
            return None
        value = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
        stored_offset = offset and name.endswith("norm.weight") and not name.endswith("ssm_norm.weight")
        return value - offset if stored_offset else value  # stored as 1 + w

    m.embedding = get("token_embd.weight")
    m.final_norm = get("token_embd_norm.weight" if family == "lfm2" else "output_norm.weight")
    m.head = m.embedding if "output.weight" not in tensors else get("output.weight")

    def read_layer(i, kind, is_ffn):
        b = f"blk.{i}."
        norm = get(b + (GGUF_FFN_NORM.get(family, "ffn_norm.weight") if is_ffn else "attn_norm.weight"))
        t = {key: get(b + name) for key, name in GGUF_NAMES[kind].items()}
        if kind == "deltanet" and t["ba"] is not None:  # Qwen3-Next: per key head [b, a]
            split_ba(t, d["deltanet"]["k_heads"], d["deltanet"]["v_heads"] // d["deltanet"]["k_heads"])
        elif kind == "deltanet" and family in ("qwen3_5", "qwen3_5_moe"):
            t["A"], t["dt_bias"] = t["A"].reshape(-1), t["dt_bias"].reshape(-1)
            untile_value_heads(t, d["deltanet"])
        if kind == "attention" and family in ("granitemoehybrid", "nemotron_h"):  # permuted as `llama` q/k rows
            t["q"] = unpermute_adjacent_pairs(t["q"], d["attn"]["n_heads"])
            t["k"] = unpermute_adjacent_pairs(t["k"], d["attn"]["n_kv"])
        return norm, checked(kind, t, GGUF_NAMES[kind])

    assemble(m, gguf_kinds(family, kv, tensors, n), read_layer)
    return m
