"""An independent float64 numpy forward pass of every family cbatch runs, sharing no code with it, written
from each family's published definition (Hugging Face's modeling_llama/mistral/qwen2/qwen3/gemma2/gemma3/
phi3) and driven by one description per family (the FAMILIES rows), not one copy per family:
- Llama / Mistral: RMSNorm x * w, SwiGLU, RoPE on halves, GQA; Mistral's window on every layer;
- Qwen2: q/k/v biases; Qwen2/3: a window only with use_sliding_window, from layer max_window_layers on;
- Qwen3: RMSNorm x * w of every q and k head before RoPE;
- Gemma 2: RMSNorm x * (1 + w), embeddings x sqrt(hidden), GeGLU (tanh GELU), each sublayer's output
  normed before the residual add, window on even layers, scores and logits softcapped (cap * tanh(x / cap)),
  queries scaled by query_pre_attn_scalar^-1/2;
- Gemma 3: Gemma 2 without softcaps, plus (1 + w) q/k norms; windowed layers (layer_types, or all but every
  sliding_window_pattern-th) rotate with the local base (rope_local_base_freq), the others with rope_theta;
- Phi-3: qkv_proj (q, k, v rows) and gate_up_proj (gate rows, then up rows) fused, window on every layer;
- SmolLM3 (modeling_smollm3): Llama whose NoPE layers (no_rope_layers[i] == 0, by default every fourth:
  (i + 1) % no_rope_layer_interval == 0) leave q and k unrotated, YaRN on the others; ties by default;
- mixtures of experts (modeling_qwen3_moe/qwen2_moe/mixtral/olmoe, transformers 5), one code path with the
  routing rule as data: router logits = x . router rows, softmax over all experts, the top k
  (num_experts_per_tok) of it, those k weights renormalised to sum 1 when the rule says (Mixtral always;
  Qwen3-MoE, Qwen2-MoE and OLMoE when norm_topk_prob; a GGUF has no key for it, llama.cpp renormalises for
  `llama` (Mixtral) and qwen3moe, not for qwen2moe and olmoe), output = sum of weight x SwiGLU expert;
  Qwen2-MoE adds its shared expert scaled by sigmoid(shared_expert_gate . x). Which layers are sparse:
  Qwen's (i + 1) % decoder_sparse_step == 0 and i not in mlp_only_layers (the others: every layer), in a
  GGUF every layer with ffn_gate_inp. Qwen3-MoE's q/k norm is per head (as Qwen3's), OLMoE's spans the
  whole q and k projections, before the split into heads; Qwen2-MoE has q/k/v biases;
- gpt-oss (modeling_gpt_oss, transformers 5): q/k/v/o biases; per q head a learned sink logit that joins
  the softmax (it shares the max subtraction and the denominator, and weights no value); windows on the
  layer_types' sliding layers (a GGUF: even layers, llama.cpp's pattern 2); YaRN RoPE (truncate: false
  keeps the correction range's ends fractional; cos and sin times 0.1 ln(factor) + 1); router logits with a
  bias, the top k of the logits, a softmax over those k; experts with biases and the clamped SwiGLU
  (gate = min(gate, limit), up = clip(up, -limit, limit), (up + 1) * gate * sigmoid(alpha * gate)); experts
  stacked (experts, in, out) with gate and up interleaved, or as MXFP4 blocks and scales (decoded here).
A query at position p attends keys p - window < key <= p on windowed layers (Hugging Face's masks).
Loaders: a Hugging Face directory (config.json as transformers 4 or 5 write it, a Gemma 3 text_config,
model.safetensors read here: F32/BF16/F16, sharded or not), or a GGUF read with the `gguf` package
(dequantized by gguf.quants) under llama.cpp's conventions: `llama` q/k rows permuted back, Gemma norms
stored as 1 + w, Gemma 3's pattern 6 and local base 10000, Gemma's query scale 1/sqrt(head_dim) (27B:
1/sqrt(hidden / heads)); a `llama` file's window applies to every layer (Mistral), and Phi-3's window as
its Hugging Face definition does (llama.cpp itself turns Phi-3's window off, as a stop-gap); `smollm3`
files are permuted as `llama` ones, and their NoPE layers are llama.cpp's hard-coded every fourth."""
import copy
import json
import math
import os
import struct

import numpy as np

# window_layers: which layers `sliding_window` applies to; gemma: (1 + w) norms, sqrt(hidden) embedding
# scale, query_pre_attn_scalar, softcaps; caps: the (attention, final) softcaps of a file that names none
# (Gemma2Config's defaults, and llama.cpp's); qk_norm, qkv_bias, sandwich (post-attention and post-FFN
# norms), fused (qkv_proj, gate_up_proj): tensors the family must have; nope_interval: NoPE layers by default
# every nope_interval-th (SmolLM3); tied: tie_word_embeddings' default.
FAMILIES = {
    "llama": dict(window_layers="none"),
    "mistral": dict(window_layers="all"),
    "qwen2": dict(window_layers="qwen", qkv_bias=True),
    "qwen3": dict(window_layers="qwen", qk_norm=True),
    "gemma2": dict(window_layers="even", gemma=True, sandwich=True, caps=(50.0, 30.0)),
    "gemma3": dict(window_layers="pattern", gemma=True, sandwich=True, qk_norm=True),
    "phi3": dict(window_layers="all", fused=True),
    "smollm3": dict(window_layers="none", nope_interval=4, tied=True),
    "qwen3_moe": dict(window_layers="qwen", qk_norm=True, moe="qwen", renorm="config", gguf_renorm=True),
    "qwen2_moe": dict(window_layers="qwen", qkv_bias=True, moe="qwen", renorm="config", gguf_renorm=False,
                      shared_expert=True),
    "mixtral": dict(window_layers="all", moe="all", renorm="always", gguf_renorm=True),
    "olmoe": dict(window_layers="none", qk_norm="full", moe="all", renorm="config", gguf_renorm=False),
    "gpt_oss": dict(window_layers="even", qkv_bias=True, o_bias=True, sinks=True, moe="all", renorm="config",
                    gguf_renorm=False, router="topk_softmax", expert_bias=True,
                    gguf_ffn_norm="post_attention_norm.weight"),
}
# moe: which layers are sparse ("qwen": decoder_sparse_step and mlp_only_layers; "all"); renorm: whether the
# top-k weights are renormalised ("always", or "config": norm_topk_prob, default false); gguf_renorm: the
# rule llama.cpp applies to the family's GGUF files.
HF_MODEL_TYPES = {"gemma3_text": "gemma3"}
GGUF_FAMILIES = {"qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe", "gpt-oss": "gpt_oss"}  # and `llama` with experts: Mixtral
DEFAULT_THETA = {"gemma3": 1000000.0, "smollm3": 2000000.0}  # the config classes' defaults (Gemma3TextConfig, ...)
LLAMA_CPP_WINDOWS = {"llama": "all", "qwen2": "none", "qwen3": "none", "gemma2": "even", "gemma3": "pattern",
                     "phi3": "all", "mixtral": "all", "qwen3_moe": "none", "qwen2_moe": "none", "olmoe": "none",
                     "gpt_oss": "even", "smollm3": "none"}
LLAMA_CPP_PERMUTED = {"llama", "smollm3"}  # the architectures llama.cpp's converter permutes q/k rows of
# What a gpt-oss GGUF cannot say: its SwiGLU's limit and slope (llama.cpp hard-codes them) and YaRN's
# truncate: false (no key; the model's definition).
GGUF_SWIGLU = {"gpt_oss": (7.0, 1.702)}
GGUF_YARN_TRUNCATE = {"gpt_oss": False}
GGUF_LOCAL_THETA = 10000.0  # llama.cpp's hard-coded Gemma 3 local base
GGUF_27B_LAYERS = {"gemma2": 46, "gemma3": 62}
# A layer's tensors: the Model's key -> (Hugging Face name, llama.cpp's GGUF name).
LAYER_TENSORS = {
    "in_norm": ("input_layernorm.weight", "attn_norm.weight"), "o": ("self_attn.o_proj.weight", "attn_output.weight"),
    "q": ("self_attn.q_proj.weight", "attn_q.weight"), "k": ("self_attn.k_proj.weight", "attn_k.weight"),
    "v": ("self_attn.v_proj.weight", "attn_v.weight"), "qkv": ("self_attn.qkv_proj.weight", "attn_qkv.weight"),
    "bq": ("self_attn.q_proj.bias", "attn_q.bias"), "bk": ("self_attn.k_proj.bias", "attn_k.bias"),
    "bv": ("self_attn.v_proj.bias", "attn_v.bias"), "bo": ("self_attn.o_proj.bias", "attn_output.bias"),
    "sinks": ("self_attn.sinks", "attn_sinks.weight"),
    "q_norm": ("self_attn.q_norm.weight", "attn_q_norm.weight"),
    "k_norm": ("self_attn.k_norm.weight", "attn_k_norm.weight"),
    "post_attn": ("post_attention_layernorm.weight", "post_attention_norm.weight"),
    "pre_ffn": ("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
    "post_ffn": ("post_feedforward_layernorm.weight", "post_ffw_norm.weight"),
    "gate": ("mlp.gate_proj.weight", "ffn_gate.weight"), "up": ("mlp.up_proj.weight", "ffn_up.weight"),
    "gate_up": ("mlp.gate_up_proj.weight", "ffn_up.weight"), "down": ("mlp.down_proj.weight", "ffn_down.weight"),
}
# A sparse layer's tensors: router (experts, dim), experts' gate and up (experts, width, dim) and down
# (experts, dim, width), the shared expert's gate/up (width, dim), down (dim, width) and its gate (dim).
# Hugging Face names: per expert, the family's names (Mixtral's block_sparse_moe, w1 gate, w3 up, w2 down).
HF_MOE_NAMES = {"mixtral": ("block_sparse_moe.gate.weight", "block_sparse_moe.experts.{}.{}.weight", "w1", "w3", "w2")}
HF_MOE_DEFAULT = ("mlp.gate.weight", "mlp.experts.{}.{}.weight", "gate_proj", "up_proj", "down_proj")
SHARED_TENSORS = {"sh_gate": ("mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"),
                  "sh_up": ("mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"),
                  "sh_down": ("mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"),
                  "sh_router": ("mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight")}
MOE_KEYS = ("router", "exp_gate", "exp_up", "exp_down", "router_bias", "exp_gate_b", "exp_up_b", "exp_down_b") + \
    tuple(SHARED_TENSORS)


class Model:
    """The description of one model (sizes, per-layer windows and RoPE frequencies, scales, caps) and its
    float64 weights in Hugging Face's layout: layers[i] holds q, k, v, o (out, in), q/k/v biases, q/k
    norms, in_norm, post_attn, pre_ffn, post_ffn, gate, up, down (absent ones are None)."""

    def __init__(self, family, c):
        spec = FAMILIES[family]
        self.family = family
        self.n_layers, self.dim = c["n_layers"], c["dim"]
        self.n_heads, self.n_kv, self.hd = c["n_heads"], c["n_kv"], c["head_dim"]
        self.eps = c["eps"]
        self.gemma = spec.get("gemma", False)
        self.norm_offset = 1.0 if self.gemma else 0.0
        self.embed_scale = math.sqrt(self.dim) if self.gemma else 1.0
        self.activation = c["activation"]
        self.swiglu = c.get("swiglu")  # (limit, alpha) of the clamped SwiGLU, or None
        self.q_scale = c["q_scale"]
        self.attn_cap, self.final_cap = c.get("attn_cap") or 0.0, c.get("final_cap") or 0.0
        self.windows = c["windows"]
        self.nope = c.get("nope") or [False] * self.n_layers  # per layer: q and k not rotated
        self.theta, self.local_theta, self.rope_scaling = c["theta"], c.get("local_theta"), c.get("rope_scaling")
        self.inv_freq = self.rope_tables()
        self.spec = spec
        self.moe = c.get("moe")  # None, or dict(n_experts, top_k, renorm, rule: "softmax_topk" or "topk_softmax")
        self.routing_log = None  # a list to collect (layer, chosen experts (T, k), k-th minus (k+1)-th logit (T,))
        self.embedding = self.head = self.final_norm = None
        self.layers = []

    def rope_tables(self):
        """Per layer: RoPE inverse frequencies (windowed layers use the local base, unscaled, if there is one)."""
        local = self.local_theta is not None
        return [rope_inv_freq(self.hd, self.local_theta, None) if w and local
                else rope_inv_freq(self.hd, self.theta, self.rope_scaling) for w in self.windows]

    def rope_factor(self, i):
        """What layer i's cos and sin are multiplied by (YaRN's attention factor on global layers)."""
        local = self.local_theta is not None and self.windows[i]
        return 1.0 if local else rope_attention_factor(self.rope_scaling)

    def features(self):
        """The features of this model whose absence without() can simulate."""
        out = ["rope_theta"] if self.theta != 10000.0 else []
        out += ["nope"] if any(self.nope) else []
        if any(self.windows):
            out.append("window")
        out += [f for f in ("qkv_bias", "qk_norm", "sandwich", "fused", "shared_expert") if self.spec.get(f)]
        if self.moe:
            out.append("moe_rule" if self.moe.get("rule") == "topk_softmax" else "moe_renorm")
        out += [f for f in ("o_bias", "expert_bias") if self.spec.get(f)]
        out += ["sinks", "sinks_zeroed"] if self.spec.get("sinks") else []
        out += ["router_bias"] if self.spec.get("router") else []
        out += ["swiglu_clamp"] if self.swiglu else []
        if (self.rope_scaling or {}).get("rope_type") == "yarn" and not self.rope_scaling.get("truncate", True):
            out.append("yarn_truncate")
        if self.gemma:
            out += ["norm_offset", "embed_scale", "activation"]
        if self.q_scale != self.hd ** -0.5:
            out.append("query_scale")
        out += [f for f, on in (("attn_softcap", self.attn_cap), ("final_softcap", self.final_cap)) if on]
        if len({tuple(f) for f in self.inv_freq}) > 1:
            out.append("local_rope")
        if rope_inv_freq(self.hd, self.theta, self.rope_scaling)[-1] != rope_inv_freq(self.hd, self.theta, None)[-1]:
            out.append("rope_scaling")
        return out

    def without(self, feature):
        """A copy computing as if `feature` were missing (what a backend that forgot it would output)."""
        m = copy.copy(self)
        m.layers = [dict(l) for l in self.layers]
        if feature == "rope_theta":  # the default base instead of the configured one
            m.theta = 10000.0
            m.inv_freq = m.rope_tables()
        elif feature == "window":
            m.windows = [0] * self.n_layers
        elif feature == "nope":  # every layer rotated
            m.nope = [False] * self.n_layers
        elif feature == "norm_offset":
            m.norm_offset = 0.0
        elif feature == "embed_scale":
            m.embed_scale = 1.0
        elif feature == "activation":
            m.activation = "silu"
        elif feature == "query_scale":
            m.q_scale = self.hd ** -0.5
        elif feature == "attn_softcap":
            m.attn_cap = 0.0
        elif feature == "final_softcap":
            m.final_cap = 0.0
        elif feature == "rope_scaling":
            m.rope_scaling = None
            m.inv_freq = m.rope_tables()
        elif feature == "local_rope":
            m.local_theta = None
            m.inv_freq = m.rope_tables()
        elif feature == "moe_renorm":  # the other renormalisation
            m.moe = dict(self.moe, renorm=not self.moe["renorm"])
        elif feature == "moe_rule":  # softmax over all experts, then the top k (not renormalised)
            m.moe = dict(self.moe, rule="softmax_topk", renorm=False)
        elif feature == "swiglu_clamp":  # plain SwiGLU
            m.swiglu, m.activation = None, "silu"
        elif feature == "yarn_truncate":  # the correction range rounded out, as transformers' default does
            m.rope_scaling = dict(self.rope_scaling, truncate=True)
            m.inv_freq = m.rope_tables()
        for l in m.layers:
            if feature == "qkv_bias":
                l["bq"] = l["bk"] = l["bv"] = None
            elif feature == "qk_norm":
                l["q_norm"] = l["k_norm"] = None
            elif feature == "sandwich":
                l["post_attn"] = l["post_ffn"] = None
            elif feature == "fused":  # up rows read as gate rows and back
                l["gate"], l["up"] = l["up"], l["gate"]
            elif feature == "shared_expert":
                l["sh_router"] = None
            elif feature == "o_bias":
                l["bo"] = None
            elif feature == "sinks":
                l["sinks"] = None
            elif feature == "sinks_zeroed":
                l["sinks"] = np.zeros_like(l["sinks"])
            elif feature == "router_bias":
                l["router_bias"] = None
            elif feature == "expert_bias":
                l["exp_gate_b"] = l["exp_up_b"] = l["exp_down_b"] = None
        return m


def rope_inv_freq(head_dim, theta, scaling):
    """RoPE inverse frequencies, with rope_scaling (or transformers 5's rope_parameters) type default,
    linear or llama3 applied."""
    inv = theta ** -(np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    scaling = scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / scaling["factor"]
    if kind == "yarn":
        return yarn_inv_freq(inv, head_dim, theta, scaling)
    if kind != "llama3":
        raise NotImplementedError(f"rope type {kind}")
    factor, context = scaling["factor"], scaling["original_max_position_embeddings"]
    low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
    wavelen = 2 * np.pi / inv
    smooth = (context / wavelen - low) / (high - low)
    mid = (1 - smooth) * inv / factor + smooth * inv
    return np.where(wavelen > context / low, inv / factor, np.where(wavelen < context / high, inv, mid))


def yarn_inv_freq(inv, head_dim, theta, scaling):
    """YaRN: dims below the correction range keep their frequency, those above are divided by factor, a
    linear ramp between; the range's ends are the dims turning beta_fast and beta_slow times over the
    original context, rounded out to whole dims unless truncate is false."""
    context, factor = scaling["original_max_position_embeddings"], scaling["factor"]

    def dim_of(rotations):
        return head_dim * math.log(context / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = dim_of(scaling.get("beta_fast", 32.0)), dim_of(scaling.get("beta_slow", 1.0))
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if high == low:
        high += 0.001
    ramp = np.clip((np.arange(head_dim // 2) - low) / (high - low), 0.0, 1.0)  # 0: keep, 1: interpolate
    return inv * (1 - ramp) + inv / factor * ramp


def rope_attention_factor(scaling):
    scaling = scaling or {}
    if scaling.get("rope_type", scaling.get("type")) != "yarn":
        return 1.0
    factor = scaling["factor"]
    return scaling.get("attention_factor") or (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)


def layer_windows(kind, n_layers, window, pattern=6, first=0):
    if not window:
        return [0] * n_layers
    on = {"none": lambda i: False, "all": lambda i: True, "even": lambda i: i % 2 == 0,
          "pattern": lambda i: (i + 1) % pattern != 0, "qwen": lambda i: i >= first}[kind]
    return [window if on(i) else 0 for i in range(n_layers)]


def read_layer(spec, get, n_heads, n_kv, head_dim, gguf, sparse=False):
    """One layer's tensors (get(name) reads a tensor of the layer, named as the format names it); those the
    family must have are required, the others None. A sparse layer's experts are read by the loader."""
    keys = ["in_norm", "o"] + (["qkv", "gate_up"] if spec.get("fused") else ["q", "k", "v"])
    keys += [] if sparse else ["down"] + ([] if spec.get("fused") else ["gate", "up"])
    keys += ["bq", "bk", "bv"] if spec.get("qkv_bias") else []
    keys += ["bo"] if spec.get("o_bias") else []
    keys += ["sinks"] if spec.get("sinks") else []
    keys += ["q_norm", "k_norm"] if spec.get("qk_norm") else []
    keys += ["post_attn", "pre_ffn", "post_ffn"] if spec.get("sandwich") else ["pre_ffn"]
    l = dict.fromkeys(list(LAYER_TENSORS) + list(MOE_KEYS))
    for key in keys:  # Llama-style HF files name the pre-FFN norm post_attention_layernorm
        name = LAYER_TENSORS[key][gguf]
        if key == "pre_ffn" and not spec.get("sandwich"):
            name = spec.get("gguf_ffn_norm", name) if gguf else "post_attention_layernorm.weight"
        l[key] = get(name)
    if spec.get("fused"):
        l["q"], l["k"], l["v"] = np.split(l["qkv"], [n_heads * head_dim, (n_heads + n_kv) * head_dim])
        l["gate"], l["up"] = np.split(l["gate_up"], 2)
    return l


# ---------------------------------------------------------------------------------------------- Hugging Face
def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        raw = data[info["data_offsets"][0]:info["data_offsets"][1]]
        if info["dtype"] == "U8":  # MXFP4 blocks and scales: decoded by mxfp4_to_float
            out[name] = np.frombuffer(raw, dtype=np.uint8).reshape(info["shape"])
            continue
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32)
        else:
            values = np.frombuffer(raw, dtype={"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8"}[info["dtype"]])
        out[name] = values.astype(np.float64).reshape(info["shape"])
    return out


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def mxfp4_to_float(blocks, scales):
    """OCP MXFP4 as transformers' checkpoints hold it: blocks (..., n / 32, 16) bytes, element 2i of a block in
    byte i's low nibble and 2i + 1 in its high one, E2M1 codes; scales (..., n / 32) E8M0, 2^(s - 127)."""
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(blocks.shape[:-1] + (32,))
    values = E2M1[codes] * np.exp2(scales.astype(np.float64) - 127.0)[..., None]
    return values.reshape(values.shape[:-2] + (-1,))


def read_hf_weights(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(directory, "model.safetensors"))
    out = {}
    for shard in sorted(set(json.load(open(index))["weight_map"].values())):
        out.update(read_safetensors(os.path.join(directory, shard)))
    return out


def hf_rope(c, family):
    """(rope_theta, rope_scaling dict or None, local theta or None) from transformers 4 keys (rope_theta,
    rope_scaling, rope_local_base_freq) or transformers 5's rope_parameters (per layer type for Gemma 3)."""
    params = c.get("rope_parameters") or {}
    if "full_attention" in params:
        full, local = params["full_attention"], params.get("sliding_attention", {})
        return full.get("rope_theta", DEFAULT_THETA.get(family, 10000.0)), full, local.get("rope_theta", 10000.0)
    theta = params.get("rope_theta", c.get("rope_theta", DEFAULT_THETA.get(family, 10000.0)))
    scaling = params if params else c.get("rope_scaling")
    local = c.get("rope_local_base_freq", 10000.0) if family == "gemma3" else None
    return theta, scaling, local


def hf_windows(c, family, n_layers):
    kind, window = FAMILIES[family]["window_layers"], c.get("sliding_window") or 0
    if kind == "qwen":
        window = window if c.get("use_sliding_window", False) else 0
        if "layer_types" not in c:
            return layer_windows(kind, n_layers, window, first=c.get("max_window_layers", 28))
    if kind in ("qwen", "even", "pattern") and "layer_types" in c:
        return [window if t == "sliding_attention" else 0 for t in c["layer_types"]]
    return layer_windows(kind, n_layers, window, pattern=c.get("sliding_window_pattern", 6))


def hf_nope(c, family, n_layers):
    """SmolLM3's NoPE layers: no_rope_layers (1 = RoPE), else every no_rope_layer_interval-th layer."""
    interval = FAMILIES[family].get("nope_interval")
    if not interval:
        return None
    if c.get("no_rope_layers") is not None:
        return [flag == 0 for flag in c["no_rope_layers"][:n_layers]]
    return [(i + 1) % c.get("no_rope_layer_interval", interval) == 0 for i in range(n_layers)]


def load_hf(directory):
    """The Model of a Hugging Face directory."""
    top = json.load(open(os.path.join(directory, "config.json")))
    family = HF_MODEL_TYPES.get(top["model_type"], top["model_type"])
    c = top.get("text_config", top)
    n_layers, dim, n_heads = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"]
    head_dim = c.get("head_dim") or dim // n_heads
    theta, scaling, local = hf_rope(c, family)
    gemma, caps = FAMILIES[family].get("gemma", False), FAMILIES[family].get("caps", (None, None))
    spec = FAMILIES[family]
    moe = spec.get("moe") and dict(n_experts=c.get("num_experts", c.get("num_local_experts")),
                                   top_k=c["num_experts_per_tok"],
                                   renorm=spec["renorm"] == "always" or c.get("norm_topk_prob", False),
                                   rule=spec.get("router", "softmax_topk"))
    clamped = family == "gpt_oss"
    desc = dict(n_layers=n_layers, dim=dim, n_heads=n_heads, n_kv=c.get("num_key_value_heads", n_heads),
                head_dim=head_dim, eps=c.get("rms_norm_eps", 1e-6), theta=theta, rope_scaling=scaling, moe=moe,
                local_theta=local, windows=hf_windows(c, family, n_layers), nope=hf_nope(c, family, n_layers),
                activation=c.get("hidden_activation", "gelu_pytorch_tanh") if gemma else c.get("hidden_act", "silu"),
                swiglu=(c.get("swiglu_limit", 7.0), c.get("swiglu_alpha", 1.702)) if clamped else None,
                q_scale=c.get("query_pre_attn_scalar", 256) ** -0.5 if gemma else head_dim ** -0.5,
                attn_cap=c.get("attn_logit_softcapping", caps[0]) if gemma else 0,
                final_cap=c.get("final_logit_softcapping", caps[1]) if gemma else 0)
    m = Model(family, desc)
    w = read_hf_weights(directory)
    prefixes = ("model.", "language_model.model.", "model.language_model.")  # text models, Gemma 3 multimodal
    prefix = next(p for p in prefixes if p + "embed_tokens.weight" in w)
    m.embedding, m.final_norm = w[prefix + "embed_tokens.weight"], w[prefix + "norm.weight"]
    tied = c.get("tie_word_embeddings", top.get("tie_word_embeddings", gemma or spec.get("tied", False)))
    head = next((w[n] for n in ("lm_head.weight", "language_model.lm_head.weight") if n in w), None)
    m.head = m.embedding if tied else head
    assert m.head is not None, "untied model without lm_head.weight"
    for i in range(n_layers):
        get = lambda name, p=f"{prefix}layers.{i}.": w[p + name]  # noqa: E731 (KeyError: a missing tensor)
        sparse = bool(moe) and (spec["moe"] == "all" or (
            i not in (c.get("mlp_only_layers") or []) and (i + 1) % c.get("decoder_sparse_step", 1) == 0))
        l = read_layer(spec, get, n_heads, m.n_kv, head_dim, gguf=False, sparse=sparse)
        if sparse and spec.get("router") == "topk_softmax":
            read_stacked_experts(l, get, w, f"{prefix}layers.{i}.mlp.")
        elif sparse:
            router, expert, *parts = HF_MOE_NAMES.get(family, HF_MOE_DEFAULT)
            l["router"] = get(router)
            for key, part in zip(("exp_gate", "exp_up", "exp_down"), parts):
                l[key] = np.stack([get(expert.format(e, part)) for e in range(moe["n_experts"])])
            read_shared(spec, l, get, gguf=False)
        m.layers.append(l)
    return m


def read_stacked_experts(l, get, w, p):
    """gpt-oss's router (with bias) and stacked experts: gate_up_proj (experts, in, 2 * width), gate and up
    interleaved, or the MXFP4 pair of its (experts, 2 * width, in) form; down_proj likewise."""
    l["router"], l["router_bias"] = get("mlp.router.weight"), get("mlp.router.bias")

    def matrix(name):  # (experts, in, out)
        if p + name + "_blocks" in w:
            return mxfp4_to_float(w[p + name + "_blocks"], w[p + name + "_scales"]).transpose(0, 2, 1)
        return w[p + name]

    gate_up, bias = matrix("experts.gate_up_proj"), get("mlp.experts.gate_up_proj_bias")
    l["exp_gate"], l["exp_up"] = gate_up[..., 0::2].transpose(0, 2, 1), gate_up[..., 1::2].transpose(0, 2, 1)
    l["exp_gate_b"], l["exp_up_b"] = bias[:, 0::2], bias[:, 1::2]
    l["exp_down"], l["exp_down_b"] = matrix("experts.down_proj").transpose(0, 2, 1), get("mlp.experts.down_proj_bias")


def read_shared(spec, l, get, gguf):
    if spec.get("shared_expert"):
        for key, names in SHARED_TENSORS.items():
            l[key] = get(names[gguf])
        l["sh_router"] = l["sh_router"].reshape(-1)  # (1, dim) in a directory, (dim) or (1, dim) in a GGUF


# ---------------------------------------------------------------------------------------------------- GGUF
def unpermute_adjacent_pairs(w, n_heads):
    """Undoes llama.cpp's permutation of `llama` q/k rows (rotate-half pairs stored as adjacent pairs)."""
    return w.reshape(n_heads, w.shape[0] // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_gguf(path):
    """The Model of a GGUF file, under llama.cpp's conventions (see the file's header)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    reader = GGUFReader(path)
    arch = reader.fields["general.architecture"].contents()
    kv = {k[len(arch) + 1:]: f.contents() for k, f in reader.fields.items() if k.startswith(arch + ".")}
    tensors = {t.name: t for t in reader.tensors}
    family = GGUF_FAMILIES.get(arch, arch)
    if arch == "llama" and any(name.endswith(".ffn_gate_inp.weight") for name in tensors):
        family = "mixtral"
    n_layers, dim, n_heads = kv["block_count"], kv["embedding_length"], kv["attention.head_count"]
    head_dim = kv.get("attention.key_length", dim // n_heads)
    spec = FAMILIES[family]
    gemma, caps = spec.get("gemma", False), spec.get("caps", (0, 0))
    is_27b = GGUF_27B_LAYERS.get(family) == n_layers
    scaling = None
    if kv.get("rope.scaling.type") == "yarn":
        scaling = dict(rope_type="yarn", factor=kv["rope.scaling.factor"],
                       truncate=GGUF_YARN_TRUNCATE.get(family, True),
                       original_max_position_embeddings=kv["rope.scaling.original_context_length"])
    desc = dict(rope_scaling=scaling, swiglu=GGUF_SWIGLU.get(family),
                n_layers=n_layers, dim=dim, n_heads=n_heads, n_kv=kv.get("attention.head_count_kv", n_heads),
                head_dim=head_dim, eps=kv.get("attention.layer_norm_rms_epsilon", 1e-5),
                theta=kv.get("rope.freq_base", 10000.0), local_theta=GGUF_LOCAL_THETA if family == "gemma3" else None,
                windows=layer_windows(LLAMA_CPP_WINDOWS[family], n_layers, kv.get("attention.sliding_window", 0)),
                nope=[(i + 1) % spec["nope_interval"] == 0 for i in range(n_layers)] if spec.get("nope_interval") else None,
                activation="gelu_pytorch_tanh" if gemma else "silu",
                q_scale=(dim // n_heads if is_27b else head_dim) ** -0.5,
                attn_cap=kv.get("attn_logit_softcapping", caps[0]),
                final_cap=kv.get("final_logit_softcapping", caps[1]),
                moe=spec.get("moe") and dict(n_experts=kv["expert_count"], top_k=kv["expert_used_count"],
                                             renorm=spec["gguf_renorm"], rule=spec.get("router", "softmax_topk")))
    m = Model(family, desc)

    def get(name):
        t = tensors[name]
        value = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
        return value - 1.0 if gemma and name.endswith("norm.weight") else value  # stored as 1 + w

    m.embedding, m.final_norm = get("token_embd.weight"), get("output_norm.weight")
    m.head = m.embedding if "output.weight" not in tensors else get("output.weight")
    for i in range(n_layers):
        sparse = f"blk.{i}.ffn_gate_inp.weight" in tensors
        layer_get = lambda name, b=f"blk.{i}.": get(b + name)  # noqa: E731
        l = read_layer(spec, layer_get, n_heads, m.n_kv, head_dim, gguf=True, sparse=sparse)
        if sparse:
            for key, name in (("router", "ffn_gate_inp"), ("exp_gate", "ffn_gate_exps"), ("exp_up", "ffn_up_exps"),
                              ("exp_down", "ffn_down_exps")):
                l[key] = layer_get(name + ".weight")
            if spec.get("expert_bias"):
                for key, name in (("router_bias", "ffn_gate_inp"), ("exp_gate_b", "ffn_gate_exps"),
                                  ("exp_up_b", "ffn_up_exps"), ("exp_down_b", "ffn_down_exps")):
                    l[key] = layer_get(name + ".bias")
            read_shared(spec, l, layer_get, gguf=True)
        if arch in LLAMA_CPP_PERMUTED:
            l["q"], l["k"] = unpermute_adjacent_pairs(l["q"], n_heads), unpermute_adjacent_pairs(l["k"], m.n_kv)
        m.layers.append(l)
    return m


# ------------------------------------------------------------------------------------------------- forward
def rms_norm(m, x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + m.eps) * (m.norm_offset + w)


def rope(x, positions, inv_freq, factor=1.0):  # x: (T, heads, head_dim); rotates (i, i + head_dim / 2)
    angles = positions[:, None] * inv_freq[None, :]
    cos, sin = factor * np.cos(angles)[:, None, :], factor * np.sin(angles)[:, None, :]
    a, b = np.split(x, 2, axis=-1)
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def activation(m, g):
    if m.activation == "silu":
        return g / (1.0 + np.exp(-g))
    assert m.activation in ("gelu_pytorch_tanh", "gelu_tanh", "gelu_new"), m.activation
    return 0.5 * g * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g + 0.044715 * g ** 3)))


def linear(x, w, bias=None):
    return x @ w.T + (bias if bias is not None else 0.0)


def attention(m, i, q, k, v, cache, positions, sinks=None):
    """Rows of one sequence: appends k, v to its cache of layer i, attends causally within the window; sinks
    (heads) join each head's softmax."""
    cache[i] = (k, v) if cache[i] is None else (np.concatenate([cache[i][0], k]), np.concatenate([cache[i][1], v]))
    group = m.n_heads // m.n_kv
    keys, values = np.repeat(cache[i][0], group, axis=1), np.repeat(cache[i][1], group, axis=1)
    s = (q.transpose(1, 0, 2) @ keys.transpose(1, 2, 0)) * m.q_scale  # (heads, T, keys)
    if m.attn_cap:
        s = m.attn_cap * np.tanh(s / m.attn_cap)
    key_pos = np.arange(keys.shape[0])[None, :]
    masked = key_pos > positions[:, None]
    if m.windows[i]:
        masked |= key_pos <= positions[:, None] - m.windows[i]
    s = np.where(masked[None], -np.inf, s)
    sink = None if sinks is None else np.broadcast_to(sinks[:, None, None], s.shape[:2] + (1,))
    if sink is not None:  # one more column of the softmax, dropped after it
        s = np.concatenate([s, sink], axis=-1)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    if sink is not None:
        s = s[..., :-1]
    return (s @ values.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(len(positions), -1)


def glu(m, h, gate, up, down, gate_b=None, up_b=None, down_b=None):
    g, u = linear(h, gate, gate_b), linear(h, up, up_b)
    if m.swiglu:  # gpt-oss's clamped SwiGLU
        limit, alpha = m.swiglu
        g, u = np.minimum(g, limit), np.clip(u, -limit, limit)
        return linear((u + 1.0) * g / (1.0 + np.exp(-alpha * g)), down, down_b)
    return linear(activation(m, g) * u, down, down_b)


def moe(m, i, l, h):
    """Layer i's mixture of experts on rows h: softmax of the router logits, the top k of it (renormalised
    when m.moe says), the chosen experts' outputs weighted by it, plus the gated shared expert if any."""
    k = m.moe["top_k"]
    router = linear(h, l["router"], l["router_bias"])  # (T, experts)
    order = np.argsort(-router, axis=-1, kind="stable")
    top = order[:, :k]  # (T, k)
    if m.moe.get("rule") == "topk_softmax":  # a softmax over the k chosen logits only
        chosen = np.take_along_axis(router, top, axis=-1)
        weights = np.exp(chosen - chosen.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
    else:
        probs = np.exp(router - router.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        weights = np.take_along_axis(probs, top, axis=-1)
        if m.moe["renorm"]:
            weights /= weights.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    biases = [l[key] if l[key] is not None else [None] * len(l["exp_gate"])
              for key in ("exp_gate_b", "exp_up_b", "exp_down_b")]
    for e in np.unique(top):
        rows, slots = np.nonzero(top == e)
        expert = glu(m, h[rows], l["exp_gate"][e], l["exp_up"][e], l["exp_down"][e], *(b[e] for b in biases))
        out[rows] += weights[rows, slots][:, None] * expert
    if l["sh_router"] is not None:
        gate = 1.0 / (1.0 + np.exp(-(h @ l["sh_router"])))
        out += gate[:, None] * glu(m, h, l["sh_gate"], l["sh_up"], l["sh_down"])
    if m.routing_log is not None and k < router.shape[1]:
        ranked = np.take_along_axis(router, order, axis=-1)
        m.routing_log.append((i, top, ranked[:, k - 1] - ranked[:, k]))
    return out


def forward(m, tokens, seqs, positions, caches, rows):
    """Final hidden states (normed) of `rows` of a ragged batch: token t of sequence seqs[t] at positions[t];
    a sequence's rows are consecutive and continue the keys and values its cache holds."""
    x = m.embedding[tokens] * m.embed_scale
    n = len(tokens)
    for i, l in enumerate(m.layers):
        h = rms_norm(m, x, l["in_norm"])
        q, k = linear(h, l["q"], l["bq"]), linear(h, l["k"], l["bk"])
        if l["q_norm"] is not None and m.spec.get("qk_norm") == "full":  # OLMoE: over the whole projection
            q, k = rms_norm(m, q, l["q_norm"]), rms_norm(m, k, l["k_norm"])
        q, k = q.reshape(n, m.n_heads, m.hd), k.reshape(n, m.n_kv, m.hd)
        v = linear(h, l["v"], l["bv"]).reshape(n, m.n_kv, m.hd)
        if l["q_norm"] is not None and m.spec.get("qk_norm") != "full":
            q, k = rms_norm(m, q, l["q_norm"]), rms_norm(m, k, l["k_norm"])
        if not m.nope[i]:
            factor = m.rope_factor(i)
            q, k = rope(q, positions, m.inv_freq[i], factor), rope(k, positions, m.inv_freq[i], factor)
        att = np.empty((n, m.n_heads * m.hd))
        for s in np.unique(seqs):
            r = np.nonzero(seqs == s)[0]
            att[r] = attention(m, i, q[r], k[r], v[r], caches[s], positions[r], l["sinks"])
        att = linear(att, l["o"], l["bo"])
        x = x + (rms_norm(m, att, l["post_attn"]) if l["post_attn"] is not None else att)
        h = rms_norm(m, x, l["pre_ffn"])
        ffn = moe(m, i, l, h) if l["router"] is not None else glu(m, h, l["gate"], l["up"], l["down"])
        x = x + (rms_norm(m, ffn, l["post_ffn"]) if l["post_ffn"] is not None else ffn)
    return rms_norm(m, x[rows], m.final_norm)


def logits(m, hidden):
    out = linear(hidden, m.head)
    return m.final_cap * np.tanh(out / m.final_cap) if m.final_cap else out


def greedy(m, prompts, num_tokens):
    """Per prompt: (generated ids, top-1 minus top-2 logit at each step). Each prompt is prefilled on its
    own, then all decode together, one row each, on their KV caches."""
    caches = [[None] * m.n_layers for _ in prompts]
    last = logits(m, np.stack([forward(m, np.array(p), np.zeros(len(p), int), np.arange(len(p), dtype=np.float64),
                                       [caches[s]], [-1])[0] for s, p in enumerate(prompts)]))
    outs, margins = [[] for _ in prompts], [[] for _ in prompts]
    for step in range(num_tokens):
        for s, row in enumerate(last):
            top2 = np.partition(row, -2)[-2:]
            outs[s].append(int(np.argmax(row)))
            margins[s].append(float(top2[1] - top2[0]))
        if step + 1 < num_tokens:
            positions = np.array([len(p) + step for p in prompts], dtype=np.float64)
            seqs = np.arange(len(prompts))
            last = logits(m, forward(m, np.array([o[-1] for o in outs]), seqs, positions, caches, seqs))
    return list(zip(outs, margins))


def agreed_prefix(ids, margins, threshold):
    """How many leading steps of a reference result are decisive (margin above threshold)."""
    return next((i for i, g in enumerate(margins) if g <= threshold), len(ids))
