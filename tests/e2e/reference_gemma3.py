"""An independent float64 numpy forward pass of a Gemma 3 (text) GGUF, sharing no code with cbatch, written
from the published Gemma 3 definition (Hugging Face's modeling_gemma3): embeddings x sqrt(hidden);
per layer RMSNorm (1 + w), q/k/v, RMSNorm (1 + w) of every q and k head, RoPE on halves (base 10000 on
the sliding-window layers, rope_theta on the global ones: every 6th layer), causal attention scaled by
query_pre_attn_scalar^-1/2 (head_dim here) over the last `sliding_window` keys on local layers, output
projection, RMSNorm (1 + w) of the attention output added to the residual, then RMSNorm (1 + w), GeGLU
(tanh GELU) and RMSNorm (1 + w) of the FFN output added; final RMSNorm (1 + w) and the tied head. The
`gguf` package parses the file and dequantizes every tensor (its own Python code for each K-quant);
llama.cpp's converter stored each norm weight as 1 + w, so 1 is taken off to get w back."""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

SLIDING_WINDOW_PATTERN = 6
LOCAL_ROPE_THETA = 10000.0


class GgufGemma3:
    def __init__(self, path):
        reader = GGUFReader(path)
        meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("gemma3.")}
        self.n_layers = meta["gemma3.block_count"]
        self.dim = meta["gemma3.embedding_length"]
        self.n_heads = meta["gemma3.attention.head_count"]
        self.n_kv_heads = meta["gemma3.attention.head_count_kv"]
        self.head_dim = meta["gemma3.attention.key_length"]
        self.eps = meta["gemma3.attention.layer_norm_rms_epsilon"]
        self.window = meta["gemma3.attention.sliding_window"]
        half = np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim
        self.inv_freq_global = meta["gemma3.rope.freq_base"] ** -half
        self.inv_freq_local = LOCAL_ROPE_THETA ** -half
        tensors = {t.name: t for t in reader.tensors}

        def weight(name):
            t = tensors[name]
            return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)

        def norm(name):  # the definition's w (the file holds 1 + w)
            return weight(name) - 1.0

        self.embedding = weight("token_embd.weight")  # (vocab, dim), also the output head
        self.final_norm = norm("output_norm.weight")
        self.layers = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            layer = {k: weight(p + k + ".weight") for k in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
                                                            "ffn_up", "ffn_down"]}
            layer.update({k: norm(p + k + ".weight") for k in ["attn_norm", "attn_q_norm", "attn_k_norm",
                                                               "post_attention_norm", "ffn_norm", "post_ffw_norm"]})
            layer["global"] = (i + 1) % SLIDING_WINDOW_PATTERN == 0
            self.layers.append(layer)

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * (1.0 + w)

    @staticmethod
    def rope(x, positions, inv_freq):  # x: (T, heads, head_dim); rotates (i, i + head_dim / 2)
        angles = positions[:, None] * inv_freq[None, :]
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        half = x.shape[-1] // 2
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    @staticmethod
    def gelu_tanh(x):
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))

    def attention(self, q, k, v, cache, layer, positions, is_global):
        cache["k"][layer] = k if cache["k"][layer] is None else np.concatenate([cache["k"][layer], k])
        cache["v"][layer] = v if cache["v"][layer] is None else np.concatenate([cache["v"][layer], v])
        group = self.n_heads // self.n_kv_heads
        keys = np.repeat(cache["k"][layer], group, axis=1)
        values = np.repeat(cache["v"][layer], group, axis=1)
        scores = np.einsum("thd,shd->hts", q, keys) / np.sqrt(self.head_dim)
        key_pos = np.arange(keys.shape[0])[None, :]
        masked = key_pos > positions[:, None]
        if not is_global:
            masked |= key_pos <= positions[:, None] - self.window
        scores = np.where(masked[None], -np.inf, scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        return np.einsum("hts,shd->thd", scores, values).reshape(len(positions), -1)

    def forward(self, tokens, seqs, positions, caches, rows=None):
        """Logits (len(rows), vocab) of rows tokens[t] of sequence seqs[t] at positions[t] (all rows, or only
        `rows`: the head over a 262k vocabulary is most of the cost); rows of a sequence are consecutive and
        continue the keys/values its cache holds."""
        x = self.embedding[tokens] * np.sqrt(self.dim)
        t = len(tokens)
        for i, l in enumerate(self.layers):
            h = self.rmsnorm(x, l["attn_norm"])
            q = self.rmsnorm((h @ l["attn_q"].T).reshape(t, self.n_heads, self.head_dim), l["attn_q_norm"])
            k = self.rmsnorm((h @ l["attn_k"].T).reshape(t, self.n_kv_heads, self.head_dim), l["attn_k_norm"])
            v = (h @ l["attn_v"].T).reshape(t, self.n_kv_heads, self.head_dim)
            inv_freq = self.inv_freq_global if l["global"] else self.inv_freq_local
            q, k = self.rope(q, positions, inv_freq), self.rope(k, positions, inv_freq)
            att = np.empty((t, self.n_heads * self.head_dim))
            for s in np.unique(seqs):
                rows = np.nonzero(seqs == s)[0]
                att[rows] = self.attention(q[rows], k[rows], v[rows], caches[s], i, positions[rows], l["global"])
            x = x + self.rmsnorm(att @ l["attn_output"].T, l["post_attention_norm"])
            h = self.rmsnorm(x, l["ffn_norm"])
            ffn = (self.gelu_tanh(h @ l["ffn_gate"].T) * (h @ l["ffn_up"].T)) @ l["ffn_down"].T
            x = x + self.rmsnorm(ffn, l["post_ffw_norm"])
        if rows is not None:
            x = x[rows]
        return self.rmsnorm(x, self.final_norm) @ self.embedding.T

    def greedy(self, prompts, num_tokens):
        """Per prompt (a list of ids): (generated ids, top-1 minus top-2 logit margin at each step). The
        prompts are prefilled one by one and decoded together, one row each."""
        caches = [{"k": [None] * self.n_layers, "v": [None] * self.n_layers} for _ in prompts]
        last = []
        for s, ids in enumerate(prompts):
            n = len(ids)
            last.append(self.forward(np.array(ids), np.full(n, s), np.arange(n, dtype=np.float64), caches, rows=[n - 1])[0])
        outs, margins = [[] for _ in prompts], [[] for _ in prompts]
        for step in range(num_tokens):
            tokens = []
            for s, logits in enumerate(last):
                top2 = np.partition(logits, -2)[-2:]
                tokens.append(int(np.argmax(logits)))
                outs[s].append(tokens[-1])
                margins[s].append(float(abs(top2[1] - top2[0])))
            if step + 1 == num_tokens:
                break
            positions = np.array([len(prompts[s]) + step for s in range(len(prompts))], dtype=np.float64)
            last = list(self.forward(np.array(tokens), np.arange(len(prompts)), positions, caches))
        return list(zip(outs, margins))
