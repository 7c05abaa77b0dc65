"""An independent float64 numpy forward pass of every family cbatch runs, from a Hugging Face directory
(config.json + model.safetensors, read here), written from each family's published definition in
Hugging Face's modeling code and driven by one description per family (not one copy per family):
- Llama / Mistral: RMSNorm x * w, SwiGLU, RoPE on halves, GQA; Mistral's sliding window on every layer;
- Qwen2: q/k/v biases; Qwen3: RMSNorm x * w of every q and k head before RoPE;
- Gemma 2: RMSNorm x * (1 + w), embeddings x sqrt(hidden), GeGLU (tanh GELU), the attention output and the
  FFN output normed before the residual add, window on even layers, scores and logits softcapped
  (cap * tanh(x / cap)), queries scaled by query_pre_attn_scalar^-1/2;
- Gemma 3: Gemma 2's norms and scales without softcaps, (1 + w) q/k norms, window on all but every
  sliding_window_pattern-th layer, whose RoPE base is rope_theta (the others use rope_local_base_freq);
- Phi-3: qkv_proj and gate_up_proj fused (q, k, v rows; gate rows then up rows), window on every layer.
A query at position p attends keys p - window < key <= p on windowed layers (Hugging Face's masks)."""
import json
import os
import struct

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        assert info["dtype"] == "F32", info["dtype"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(info["shape"]).astype(np.float64)
    return out


class FamilyReference:
    def __init__(self, directory):
        c = json.load(open(os.path.join(directory, "config.json")))
        w = read_safetensors(os.path.join(directory, "model.safetensors"))
        t = c["model_type"]
        self.gemma = t.startswith("gemma")
        self.n_layers = c["num_hidden_layers"]
        self.dim = c["hidden_size"]
        self.n_heads = c["num_attention_heads"]
        self.n_kv = c.get("num_key_value_heads", self.n_heads)
        self.hd = c.get("head_dim", self.dim // self.n_heads)
        self.eps = c["rms_norm_eps"]
        self.scale = c.get("query_pre_attn_scalar", self.hd) ** -0.5
        self.attn_cap = c.get("attn_logit_softcapping") or 0.0
        self.final_cap = c.get("final_logit_softcapping") or 0.0
        window = c.get("sliding_window") or 0
        if t == "gemma2":
            self.windows = [window if i % 2 == 0 else 0 for i in range(self.n_layers)]
        elif t.startswith("gemma3"):
            pattern = c.get("sliding_window_pattern", 6)
            self.windows = [0 if (i + 1) % pattern == 0 else window for i in range(self.n_layers)]
        elif t in ("mistral", "phi3"):
            self.windows = [window] * self.n_layers
        else:
            self.windows = [0] * self.n_layers
        half = np.arange(0, self.hd, 2, dtype=np.float64) / self.hd
        self.inv_freq = [c.get("rope_theta", 10000.0) ** -half] * self.n_layers
        if t.startswith("gemma3"):
            local = c.get("rope_local_base_freq", 10000.0) ** -half
            self.inv_freq = [local if self.windows[i] else self.inv_freq[i] for i in range(self.n_layers)]
        self.embedding = w["model.embed_tokens.weight"]
        self.head = w.get("lm_head.weight", self.embedding)
        self.final_norm = w["model.norm.weight"]
        q_dim, kv_dim = self.n_heads * self.hd, self.n_kv * self.hd
        self.layers = []
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            get = lambda name, p=p: w.get(p + name)  # noqa: E731
            l = {"in_norm": get("input_layernorm.weight"), "o": get("self_attn.o_proj.weight"),
                 "down": get("mlp.down_proj.weight"), "q_norm": get("self_attn.q_norm.weight"),
                 "k_norm": get("self_attn.k_norm.weight")}
            if get("self_attn.qkv_proj.weight") is not None:
                qkv = get("self_attn.qkv_proj.weight")
                l["q"], l["k"], l["v"] = qkv[:q_dim], qkv[q_dim:q_dim + kv_dim], qkv[q_dim + kv_dim:]
            else:
                l["q"], l["k"], l["v"] = get("self_attn.q_proj.weight"), get("self_attn.k_proj.weight"), get("self_attn.v_proj.weight")
            if get("mlp.gate_up_proj.weight") is not None:
                gu = get("mlp.gate_up_proj.weight")
                l["gate"], l["up"] = gu[:len(gu) // 2], gu[len(gu) // 2:]
            else:
                l["gate"], l["up"] = get("mlp.gate_proj.weight"), get("mlp.up_proj.weight")
            l["biases"] = [get(f"self_attn.{n}_proj.bias") for n in "qkv"]
            if self.gemma:
                l["post_attn"], l["pre_ffn"] = get("post_attention_layernorm.weight"), get("pre_feedforward_layernorm.weight")
                l["post_ffn"] = get("post_feedforward_layernorm.weight")
            else:
                l["post_attn"], l["pre_ffn"], l["post_ffn"] = None, get("post_attention_layernorm.weight"), None
            self.layers.append(l)

    def norm(self, x, w):
        x = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return x * (1.0 + w) if self.gemma else x * w

    @staticmethod
    def rope(x, positions, inv_freq):  # (T, heads, hd), rotate-half pairs
        angles = positions[:, None] * inv_freq[None, :]
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        h = x.shape[-1] // 2
        return np.concatenate([x[..., :h] * cos - x[..., h:] * sin, x[..., :h] * sin + x[..., h:] * cos], axis=-1)

    def act(self, g):
        if self.gemma:
            return 0.5 * g * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g + 0.044715 * g ** 3)))
        return g / (1.0 + np.exp(-g))

    def logits(self, tokens):
        """Logits (T, vocab) of a whole sequence, recomputed from scratch (tiny models: no cache needed)."""
        n = len(tokens)
        pos = np.arange(n, dtype=np.float64)
        x = self.embedding[np.array(tokens)]
        if self.gemma:
            x = x * np.sqrt(self.dim)
        for i, l in enumerate(self.layers):
            h = self.norm(x, l["in_norm"])
            proj = [h @ m.T + (b if b is not None else 0.0) for m, b in zip((l["q"], l["k"], l["v"]), l["biases"])]
            q = proj[0].reshape(n, self.n_heads, self.hd)
            k = proj[1].reshape(n, self.n_kv, self.hd)
            v = proj[2].reshape(n, self.n_kv, self.hd)
            if l["q_norm"] is not None:
                q, k = self.norm(q, l["q_norm"]), self.norm(k, l["k_norm"])
            q, k = self.rope(q, pos, self.inv_freq[i]), self.rope(k, pos, self.inv_freq[i])
            group = self.n_heads // self.n_kv
            k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
            s = np.einsum("thd,shd->hts", q, k) * self.scale
            if self.attn_cap:
                s = self.attn_cap * np.tanh(s / self.attn_cap)
            keep = pos[None, :] <= pos[:, None]
            if self.windows[i]:
                keep &= pos[None, :] > pos[:, None] - self.windows[i]
            s = np.where(keep[None], s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            att = np.einsum("hts,shd->thd", s, v).reshape(n, -1) @ l["o"].T
            x = x + (self.norm(att, l["post_attn"]) if l["post_attn"] is not None else att)
            h = self.norm(x, l["pre_ffn"])
            ffn = (self.act(h @ l["gate"].T) * (h @ l["up"].T)) @ l["down"].T
            x = x + (self.norm(ffn, l["post_ffn"]) if l["post_ffn"] is not None else ffn)
        out = self.norm(x, self.final_norm) @ self.head.T
        return self.final_cap * np.tanh(out / self.final_cap) if self.final_cap else out

    def greedy(self, prompt, num_tokens):
        """(generated ids, top-1 minus top-2 margin at each step)."""
        ids, margins = list(prompt), []
        for _ in range(num_tokens):
            row = self.logits(ids)[-1]
            top2 = np.partition(row, -2)[-2:]
            margins.append(float(abs(top2[1] - top2[0])))
            ids.append(int(np.argmax(row)))
        return ids[len(prompt):], margins
