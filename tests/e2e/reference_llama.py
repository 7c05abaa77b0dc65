"""An independent reference forward pass of a Llama-architecture GGUF in numpy (float64), sharing no code
with cbatch: the `gguf` package parses the file and dequantizes its tensors (its own Python
implementation of Q4_0/Q4_1/Q8_0/F16), the math below is a plain transcription of the Llama
architecture: RMSNorm, RoPE on adjacent pairs (2i, 2i+1) as GGUF files are permuted for, grouped-query
attention with a causal mask, SwiGLU, tied or separate output head. Greedy decoding with a KV cache and
vLLM's repetition / frequency / presence penalties."""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class GgufLlama:
    def __init__(self, path):
        reader = GGUFReader(path)
        meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("llama.")}
        self.n_layers = meta["llama.block_count"]
        self.dim = meta["llama.embedding_length"]
        self.n_heads = meta["llama.attention.head_count"]
        self.n_kv_heads = meta.get("llama.attention.head_count_kv", self.n_heads)
        self.head_dim = meta.get("llama.attention.key_length", self.dim // self.n_heads)
        self.eps = meta["llama.attention.layer_norm_rms_epsilon"]
        theta = meta.get("llama.rope.freq_base", 10000.0)
        self.inv_freq = theta ** (-np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim)
        tensors = {t.name: t for t in reader.tensors}

        def weight(name):
            t = tensors[name]
            return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)

        self.embedding = weight("token_embd.weight")                     # (vocab, dim)
        self.output = weight("output.weight") if "output.weight" in tensors else self.embedding
        self.final_norm = weight("output_norm.weight")
        self.layers = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            self.layers.append({k: weight(p + k + ".weight") for k in [
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]})

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, positions):  # x: (T, heads, head_dim); rotates pairs (2i, 2i+1)
        angles = positions[:, None] * self.inv_freq[None, :]             # (T, head_dim / 2)
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def attention(self, q, k, v, cache, layer, positions):
        """One sequence's attention: q, k, v (T, heads or kv heads, head_dim) at `positions`."""
        cache["k"][layer] = k if cache["k"][layer] is None else np.concatenate([cache["k"][layer], k])
        cache["v"][layer] = v if cache["v"][layer] is None else np.concatenate([cache["v"][layer], v])
        group = self.n_heads // self.n_kv_heads
        keys = np.repeat(cache["k"][layer], group, axis=1)              # (S, heads, head_dim)
        values = np.repeat(cache["v"][layer], group, axis=1)
        scores = np.einsum("thd,shd->hts", q, keys) / np.sqrt(self.head_dim)
        future = np.arange(keys.shape[0])[None, :] > positions[:, None]
        scores = np.where(future[None], -np.inf, scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        return np.einsum("hts,shd->thd", scores, values).reshape(len(positions), -1)

    def forward(self, tokens, seqs, positions, caches):
        """Logits (T, vocab) of rows tokens[t] of sequence seqs[t] at positions[t]; rows of a sequence are
        consecutive and continue the keys/values its cache holds."""
        x = self.embedding[tokens]
        t = len(tokens)
        for i, l in enumerate(self.layers):
            h = self.rmsnorm(x, l["attn_norm"])
            q = self.rope((h @ l["attn_q"].T).reshape(t, self.n_heads, self.head_dim), positions)
            k = self.rope((h @ l["attn_k"].T).reshape(t, self.n_kv_heads, self.head_dim), positions)
            v = (h @ l["attn_v"].T).reshape(t, self.n_kv_heads, self.head_dim)
            att = np.empty((t, self.n_heads * self.head_dim))
            for s in np.unique(seqs):
                rows = np.nonzero(seqs == s)[0]
                att[rows] = self.attention(q[rows], k[rows], v[rows], caches[s], i, positions[rows])
            x = x + att @ l["attn_output"].T
            h = self.rmsnorm(x, l["ffn_norm"])
            gate, up = h @ l["ffn_gate"].T, h @ l["ffn_up"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ l["ffn_down"].T
        return self.rmsnorm(x, self.final_norm) @ self.output.T

    @staticmethod
    def penalize(logits, prompt, output, repetition, frequency, presence):
        """vLLM's penalties: repetition over prompt and output tokens (divide positive logits, multiply
        negative ones), frequency (per occurrence) and presence (once) over output tokens."""
        logits = logits.copy()
        seen = np.unique(np.array(prompt + output, dtype=np.int64))
        logits[seen] = np.where(logits[seen] > 0, logits[seen] / repetition, logits[seen] * repetition)
        if output:
            ids, counts = np.unique(np.array(output, dtype=np.int64), return_counts=True)
            logits[ids] -= frequency * counts + presence
        return logits

    def greedy(self, prompts, num_tokens, repetition=1.0, frequency=0.0, presence=0.0):
        """Per prompt (a list of ids): (generated ids, top-1 minus top-2 logit margin at each step). The
        prompts are prefilled one by one and decoded together, one row each."""
        caches = [{"k": [None] * self.n_layers, "v": [None] * self.n_layers} for _ in prompts]
        last = []
        for s, ids in enumerate(prompts):
            n = len(ids)
            logits = self.forward(np.array(ids), np.full(n, s), np.arange(n, dtype=np.float64), caches)
            last.append(logits[-1])
        outs, margins = [[] for _ in prompts], [[] for _ in prompts]
        lengths = [len(ids) for ids in prompts]
        for step in range(num_tokens):
            tokens = []
            for s, logits in enumerate(last):
                logits = self.penalize(logits, list(prompts[s]), outs[s], repetition, frequency, presence)
                top2 = np.sort(logits)[-2:]
                tokens.append(int(np.argmax(logits)))
                outs[s].append(tokens[-1])
                margins[s].append(float(top2[1] - top2[0]))
            if step + 1 == num_tokens:
                break
            positions = np.array([lengths[s] + step for s in range(len(prompts))], dtype=np.float64)
            last = list(self.forward(np.array(tokens), np.arange(len(prompts)), positions, caches))
        return list(zip(outs, margins))
