"""An independent float64 numpy forward pass of Gemma 4's text model, sharing no code with cbatch, written from
transformers' modeling_gemma4.py / configuration_gemma4.py (Gemma4TextModel, Gemma4ForCausalLM):
- embeddings times sqrt(hidden); RMSNorm x / sqrt(mean(x^2) + eps) * w (w itself, not 1 + w); final logits
  softcapped, cap * tanh(x / cap);
- a layer: x += post_attn_norm(attention(input_norm(x))); then the FFN branch h = pre_ffn_norm(x), GeGLU
  (tanh GELU) down(act(gate h) * up h); with the MoE block, post_norm_1(mlp) + post_norm_2(experts(pre_norm_2(x)))
  where the router reads x: softmax(proj(rmsnorm(x) * scale * hidden^-1/2)), the top k, renormalised, times
  per_expert_scale[e]; x += post_ffn_norm(that); then the per-layer input x += norm(proj(act(gate x) * pli[l]));
  then x *= layer_scalar;
- attention: q heads RMS-normed (q_norm), k heads (k_norm), v heads RMS-normed without weights; RoPE on halves
  (i, i + head/2); scores q.k with scaling 1.0 (no 1/sqrt(head)); sliding layers see keys p - window < key <= p.
  Sliding layers: head_dim, num_key_value_heads, rope_parameters.sliding_attention's base. Global layers:
  global_head_dim, num_global_key_value_heads (with attention_k_eq_v), proportional RoPE: frequency i is
  base^(-2i / head) for i < int(partial_rotary_factor * head / 2), else 0. attention_k_eq_v: a global layer's
  v is its k projection (normed by the v norm, not the k norm, and not rotated);
- num_kv_shared_layers: the last ones compute q only and attend over the K/V of the last earlier non-shared
  layer of their layer type; use_double_wide_mlp doubles those layers' FFN width;
- per-layer inputs pli (T, layers, P): (table[token] * sqrt(P) + norm_P(proj(embedded) * hidden^-1/2)) * 2^-1/2.
Loaders: a Hugging Face directory (config.json with the text model in text_config or not; model.safetensors under
model.language_model. or model.) and a GGUF (the gguf package) as llama.cpp's converter writes it: norms as they
are, rope_freqs (1 or 1e30 per frequency of the global layers), per-layer feed_forward_length and
head_count_kv arrays, the per-expert scale as ffn_down_exps.scale, the router's scale as ffn_gate_inp.scale.
Model.without(feature) computes as a backend that forgot the feature would."""
import copy
import json
import math
import os

import numpy as np

from family_reference import agreed_prefix, read_hf_weights  # noqa: F401  (agreed_prefix re-exported)

FEATURES = ("per_layer_inputs", "kv_sharing", "k_eq_v", "final_softcap", "value_norm", "proportional_rope",
            "layer_scalar", "local_rope", "moe_scale")


class Model:
    """Sizes and per-layer facts (d), float64 weights in Hugging Face's layout (layers[i] a dict, `w` the
    model's own), and `off`, the features left out."""

    def __init__(self, d, w, layers):
        self.d, self.w, self.layers, self.off = d, w, layers, set()

    def features(self):
        d = self.d
        out = ["final_softcap", "value_norm", "layer_scalar", "local_rope"]
        out += ["per_layer_inputs"] if d["ple"] else []
        out += ["kv_sharing"] if any(s != i for i, s in enumerate(d["sources"])) else []
        out += ["k_eq_v"] if d["k_eq_v"] else []
        out += ["proportional_rope"] if d["fraction"] < 1.0 else []
        out += ["moe_scale"] if d["moe"] else []
        return out

    def without(self, feature):
        m = copy.copy(self)
        m.off = self.off | {feature}
        return m

    def is_global(self, i):
        return self.d["windows"][i] == 0

    def inv_freq(self, i):
        d = self.d
        if not self.is_global(i):
            base = d["theta"] if "local_rope" in self.off else d["local_theta"]
            hd = d["hd"]
            return base ** -(np.arange(0, hd, 2, dtype=np.float64) / hd)
        hd = d["hd_g"]
        turning = hd // 2 if "proportional_rope" in self.off else int(d["fraction"] * hd // 2)
        inv = d["theta"] ** -(np.arange(0, hd, 2, dtype=np.float64) / hd)
        inv[turning:] = 0.0
        return inv / d["rope_factor"]


class Sequence:
    """One sequence's cache: per layer that writes K/V, its keys and values (positions, kv heads, head)."""

    def __init__(self, m):
        self.k = [None] * m.d["n_layers"]
        self.v = [None] * m.d["n_layers"]
        self.length = 0


def rms(x, eps, w=None):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rope(x, positions, inv):  # x: (T, heads, head); pairs (i, i + head / 2)
    ang = positions[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def source(m, i):
    s = m.d["sources"][i]
    if "kv_sharing" in m.off and s != i:  # the first layer of the kind instead of the last
        return next(j for j in range(i) if m.d["windows"][j] == m.d["windows"][i])
    return s


def attention(m, i, h, seq, positions):
    d, t, n = m.d, m.layers[i], len(h)
    hd = d["hd_g"] if m.is_global(i) else d["hd"]
    n_kv = d["kv_g"] if m.is_global(i) else d["kv"]
    inv = m.inv_freq(i)
    q = rms((h @ t["q"].T).reshape(n, d["n_heads"], hd), d["eps"], t["q_norm"])
    q = rope(q, positions, inv)
    if d["sources"][i] == i:
        raw_k = (h @ t["k"].T).reshape(n, n_kv, hd)
        k = rope(rms(raw_k, d["eps"], t["k_norm"]), positions, inv)
        if m.is_global(i) and d["k_eq_v"]:
            raw_v = k if "k_eq_v" in m.off else raw_k
        else:
            raw_v = (h @ t["v"].T).reshape(n, n_kv, hd)
        v = raw_v if "value_norm" in m.off else rms(raw_v, d["eps"])
        seq.k[i] = k if seq.k[i] is None else np.concatenate([seq.k[i], k])
        seq.v[i] = v if seq.v[i] is None else np.concatenate([seq.v[i], v])
    s = source(m, i)
    keys, values = seq.k[s], seq.v[s]
    window = d["windows"][i]
    group = d["n_heads"] // n_kv
    out = np.zeros((n, d["n_heads"], hd))
    for r in range(n):
        p = int(positions[r])
        first = max(0, p - window + 1) if window else 0
        for head in range(d["n_heads"]):
            kk, vv = keys[first:p + 1, head // group], values[first:p + 1, head // group]
            scores = kk @ q[r, head]
            w = np.exp(scores - scores.max())
            out[r, head] = (w / w.sum()) @ vv
    return out.reshape(n, -1) @ t["o"].T


def moe(m, i, x):
    d, t = m.d, m.layers[i]
    r = rms(x, d["eps"]) * t["router_scale"] * d["dim"] ** -0.5
    logits = r @ t["router"].T
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    h = rms(x, d["eps"], t["pre_ffn_2"])
    out = np.zeros_like(x)
    for row in range(len(x)):
        top = np.argsort(-probs[row], kind="stable")[:d["top_k"]]
        weights = probs[row, top] / probs[row, top].sum()
        for e, wt in zip(top, weights):
            scale = 1.0 if "moe_scale" in m.off else t["expert_scale"][e]
            gate, up = np.split(t["experts_gate_up"][e] @ h[row], 2)
            out[row] += wt * scale * (t["experts_down"][e] @ (gelu_tanh(gate) * up))
    return out


def per_layer_inputs(m, tokens, embedded):
    d, w = m.d, m.w
    n, P = len(tokens), d["ple"]
    proj = (embedded @ w["ple_proj"].T * d["dim"] ** -0.5).reshape(n, d["n_layers"], P)
    proj = rms(proj, d["eps"], w["ple_norm"])
    table = w["ple_table"][tokens].reshape(n, d["n_layers"], P) * math.sqrt(P)
    return (proj + table) * 2 ** -0.5


def forward(m, tokens, seq):
    """Hidden states (T, dim) of `tokens` appended to the sequence (its cache grows)."""
    d = m.d
    tokens = np.asarray(tokens)
    positions = np.arange(seq.length, seq.length + len(tokens), dtype=np.float64)
    x = m.w["embed"][tokens] * math.sqrt(d["dim"])
    pli = per_layer_inputs(m, tokens, x) if d["ple"] else None
    for i, t in enumerate(m.layers):
        x = x + rms(attention(m, i, rms(x, d["eps"], t["in_norm"]), seq, positions), d["eps"], t["post_attn"])
        h = rms(x, d["eps"], t["pre_ffn"])
        ff = (gelu_tanh(h @ t["gate"].T) * (h @ t["up"].T)) @ t["down"].T
        if t.get("router") is not None:
            ff = rms(ff, d["eps"], t["post_ffn_1"]) + rms(moe(m, i, x), d["eps"], t["post_ffn_2"])
        x = x + rms(ff, d["eps"], t["post_ffn"])
        if pli is not None and "per_layer_inputs" not in m.off:
            g = gelu_tanh(x @ t["ple_gate"].T) * pli[:, i]
            x = x + rms(g @ t["ple_proj"].T, d["eps"], t["ple_norm"])
        if "layer_scalar" not in m.off:
            x = x * t["scalar"]
    seq.length += len(tokens)
    return x


def logits(m, hidden):
    y = rms(hidden, m.d["eps"], m.w["final_norm"]) @ m.w["head"].T
    cap = m.d["final_cap"]
    return y if not cap or "final_softcap" in m.off else cap * np.tanh(y / cap)


def prefill(m, prompt, seq, chunk=None):
    chunk = chunk or len(prompt)
    for at in range(0, len(prompt), chunk):
        hidden = forward(m, prompt[at:at + chunk], seq)
    return hidden[-1]


def greedy(m, prompts, num_tokens):
    """Per prompt: (ids, top-2 margins, log-softmax of each chosen id)."""
    out = []
    for prompt in prompts:
        seq = Sequence(m)
        row = logits(m, prefill(m, prompt, seq))
        ids, margins, lps = [], [], []
        for step in range(num_tokens):
            top2 = np.partition(row, -2)[-2:]
            ids.append(int(np.argmax(row)))
            margins.append(float(top2[1] - top2[0]))
            shifted = row - row.max()
            lps.append(float(shifted[ids[-1]] - np.log(np.exp(shifted).sum())))
            if step + 1 < num_tokens:
                row = logits(m, forward(m, [ids[-1]], seq)[-1])
        out.append((ids, margins, lps))
    return out


# ---------------------------------------------------------------------------------------------- description
def kv_sources(windows, n_shared):
    """transformers' kv_sharing_modes: the last n_shared layers read the last earlier non-shared layer of their
    type."""
    n = len(windows)
    first = n - n_shared
    return [i if i < first else max(j for j in range(first) if windows[j] == windows[i]) for i in range(n)]


def describe(c, per_layer_ff=None, per_layer_kv=None):
    """The sizes and per-layer facts of a Gemma4TextConfig dict (config.json's text model)."""
    n = c["num_hidden_layers"]
    types = c["layer_types"]
    windows = [c["sliding_window"] if t == "sliding_attention" else 0 for t in types]
    rp = c.get("rope_parameters") or {}
    full, sliding = rp.get("full_attention", {}), rp.get("sliding_attention", {})
    n_shared = c.get("num_kv_shared_layers", 0)
    sources = kv_sources(windows, n_shared)
    k_eq_v = c.get("attention_k_eq_v", False)
    kv_g = c.get("num_global_key_value_heads") if k_eq_v else None
    ff = [c["intermediate_size"] * (2 if c.get("use_double_wide_mlp") and sources[i] != i else 1) for i in range(n)]
    return dict(n_layers=n, dim=c["hidden_size"], n_heads=c["num_attention_heads"], kv=c["num_key_value_heads"],
                kv_g=kv_g or c["num_key_value_heads"], hd=c["head_dim"], hd_g=c.get("global_head_dim", 512),
                eps=c.get("rms_norm_eps", 1e-6), windows=windows, sources=sources, k_eq_v=k_eq_v,
                theta=full.get("rope_theta", 1e6), local_theta=sliding.get("rope_theta", 1e4),
                fraction=full.get("partial_rotary_factor", 1.0) if full.get("rope_type") == "proportional" else 1.0,
                rope_factor=full.get("factor", 1.0), ff=per_layer_ff or ff,
                ple=c.get("hidden_size_per_layer_input") or 0, final_cap=c.get("final_logit_softcapping") or 0.0,
                moe=bool(c.get("enable_moe_block")), top_k=c.get("top_k_experts"))


def hf_layer(get, d, i):
    t = {"in_norm": get("input_layernorm.weight"), "post_attn": get("post_attention_layernorm.weight"),
         "pre_ffn": get("pre_feedforward_layernorm.weight"), "post_ffn": get("post_feedforward_layernorm.weight"),
         "q": get("self_attn.q_proj.weight"), "q_norm": get("self_attn.q_norm.weight"),
         "o": get("self_attn.o_proj.weight"), "gate": get("mlp.gate_proj.weight"), "up": get("mlp.up_proj.weight"),
         "down": get("mlp.down_proj.weight"), "scalar": get("layer_scalar")}
    if d["sources"][i] == i:
        t["k"], t["k_norm"] = get("self_attn.k_proj.weight"), get("self_attn.k_norm.weight")
        if not (d["k_eq_v"] and d["windows"][i] == 0):
            t["v"] = get("self_attn.v_proj.weight")
    if d["ple"]:
        t["ple_gate"], t["ple_proj"] = get("per_layer_input_gate.weight"), get("per_layer_projection.weight")
        t["ple_norm"] = get("post_per_layer_input_norm.weight")
    if d["moe"]:
        t["router"], t["router_scale"] = get("router.proj.weight"), get("router.scale")
        t["expert_scale"] = get("router.per_expert_scale")
        t["experts_gate_up"], t["experts_down"] = get("experts.gate_up_proj"), get("experts.down_proj")
        for k, name in (("pre_ffn_2", "pre_feedforward_layernorm_2"), ("post_ffn_1", "post_feedforward_layernorm_1"),
                        ("post_ffn_2", "post_feedforward_layernorm_2")):
            t[k] = get(name + ".weight")
    return t


def load_hf(directory):
    with open(os.path.join(directory, "config.json")) as f:
        top = json.load(f)
    c = top.get("text_config", top)
    d = describe(c)
    w = read_hf_weights(directory)
    p = next(p for p in ("model.language_model.", "model.") if p + "embed_tokens.weight" in w)
    layers = [hf_layer(lambda n, i=i: w[f"{p}layers.{i}.{n}"], d, i) for i in range(d["n_layers"])]
    own = {"embed": w[p + "embed_tokens.weight"], "final_norm": w[p + "norm.weight"]}
    own["head"] = w.get("lm_head.weight", own["embed"])
    if d["ple"]:
        own.update(ple_table=w[p + "embed_tokens_per_layer.weight"], ple_proj=w[p + "per_layer_model_projection.weight"],
                   ple_norm=w[p + "per_layer_projection_norm.weight"])
    return Model(d, own, layers)


# ---------------------------------------------------------------------------------------------------- GGUF
GGUF_LAYER = {"in_norm": "attn_norm", "post_attn": "post_attention_norm", "pre_ffn": "ffn_norm",
              "post_ffn": "post_ffw_norm", "q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
              "q_norm": "attn_q_norm", "k_norm": "attn_k_norm", "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down",
              "scalar": "layer_output_scale", "ple_gate": "inp_gate", "ple_proj": "proj", "ple_norm": "post_norm",
              "router": "ffn_gate_inp", "pre_ffn_2": "pre_ffw_norm_2", "post_ffn_1": "post_ffw_norm_1",
              "post_ffn_2": "post_ffw_norm_2"}


def load_gguf(path):
    import gguf
    reader = gguf.GGUFReader(path)
    kv = {f.name: f.contents() for f in reader.fields.values()}
    tensors = {t.name: np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(
        [int(x) for x in reversed(t.shape)]) for t in reader.tensors}
    a = kv["general.architecture"]
    n = kv[a + ".block_count"]

    def per_layer(value):
        return list(value) if isinstance(value, list) else [value] * n

    swa = per_layer(kv[a + ".attention.sliding_window_pattern"])
    windows = [kv[a + ".attention.sliding_window"] if s else 0 for s in swa]
    heads_kv = per_layer(kv[a + ".attention.head_count_kv"])
    freqs = tensors["rope_freqs.weight"].reshape(-1)
    turning = int(np.sum(freqs < 1e20))
    hd_g = kv[a + ".attention.key_length"]
    sources = kv_sources(windows, kv.get(a + ".attention.shared_kv_layers", 0))
    g = next(i for i in range(n) if windows[i] == 0)
    s = next(i for i in range(n) if windows[i])
    d = dict(n_layers=n, dim=kv[a + ".embedding_length"], n_heads=kv[a + ".attention.head_count"], kv=heads_kv[s],
             kv_g=heads_kv[g], hd=kv[a + ".attention.key_length_swa"], hd_g=hd_g,
             eps=kv[a + ".attention.layer_norm_rms_epsilon"], windows=windows, sources=sources,
             k_eq_v=f"blk.{g}.attn_v.weight" not in tensors, theta=kv[a + ".rope.freq_base"],
             local_theta=kv[a + ".rope.freq_base_swa"], fraction=2 * turning / hd_g, rope_factor=1.0,
             ff=per_layer(kv[a + ".feed_forward_length"]), ple=kv.get(a + ".embedding_length_per_layer_input", 0),
             final_cap=kv.get(a + ".final_logit_softcapping", 0.0), moe=(a + ".expert_count") in kv,
             top_k=kv.get(a + ".expert_used_count"))
    layers = []
    for i in range(n):
        b = f"blk.{i}."
        t = {k: tensors.get(b + name + ".weight") for k, name in GGUF_LAYER.items()}
        if t["scalar"] is not None:
            t["scalar"] = t["scalar"].reshape(-1)
        if d["moe"] and t["router"] is not None:
            t["router_scale"] = tensors[b + "ffn_gate_inp.scale"]
            t["expert_scale"] = tensors[b + "ffn_down_exps.scale"]
            t["experts_gate_up"] = tensors[b + "ffn_gate_up_exps.weight"]
            t["experts_down"] = tensors[b + "ffn_down_exps.weight"]
        layers.append(t)
    own = {"embed": tensors["token_embd.weight"], "final_norm": tensors["output_norm.weight"]}
    own["head"] = tensors.get("output.weight", own["embed"])
    if d["ple"]:
        own.update(ple_table=tensors["per_layer_token_embd.weight"], ple_proj=tensors["per_layer_model_proj.weight"],
                   ple_norm=tensors["per_layer_proj_norm.weight"])
    return Model(d, own, layers)
