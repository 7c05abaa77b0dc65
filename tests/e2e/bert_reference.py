"""An independent float64 numpy reference of a BERT encoder (Hugging Face BertModel: word + learned absolute
position + token type (0, or each token's own) embeddings, LayerNorm; per layer biased q/k/v, bidirectional
softmax attention, biased output projection, residual then LayerNorm; erf-GELU FFN with biases, residual
then LayerNorm) and of sentence-transformers pooling (mean over tokens, [CLS] or last token) with optional
L2 normalisation, and of BertForSequenceClassification's head (pooler dense + tanh on [CLS], then the
classifier's logits). XLM-RoBERTa (model_type xlm-roberta) differs in its positions (transformers'
create_position_ids_from_input_ids: pad_token_id + 1 on, pad tokens not counted and at pad_token_id), its
"roberta." prefix and its head (classifier.dense + tanh on <s>, then classifier.out_proj). Weights come
straight from model.safetensors (its JSON header and raw little-endian data), nothing from cbatch."""
import json
import math
import os

import numpy as np

from family_reference import read_safetensors  # F32/F16/BF16/I64 tensors as float64


class BertReference:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = json.load(f)
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.xlmr = self.config.get("model_type") == "xlm-roberta"
        base = "roberta." if self.xlmr else "bert."
        self.prefix = base if base + "embeddings.word_embeddings.weight" in w else ""
        self.w = w
        self.eps = self.config.get("layer_norm_eps", 1e-12)
        self.heads = self.config["num_attention_heads"]

    def t(self, name):
        return self.w[self.prefix + name]

    def layer_norm(self, x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.t(name + ".weight") + self.t(name + ".bias")

    def linear(self, x, name):
        return x @ self.t(name + ".weight").T + self.t(name + ".bias")

    def hidden_states(self, ids, type_ids=None):
        """(len(ids), hidden) final hidden states of one sequence; type_ids: each token's type (default all 0)."""
        n = len(ids)
        types = np.zeros(n, dtype=int) if type_ids is None else np.asarray(type_ids, dtype=int)
        x = (self.t("embeddings.word_embeddings.weight")[ids] + self.t("embeddings.position_embeddings.weight")[
             self.position_ids(ids)] + self.t("embeddings.token_type_embeddings.weight")[types])
        x = self.layer_norm(x, "embeddings.LayerNorm")
        erf = np.vectorize(math.erf)
        for i in range(self.config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q, k, v = (self.linear(x, p + "attention.self." + m) for m in ("query", "key", "value"))
            d = q.shape[1] // self.heads
            out = np.empty_like(q)
            for h in range(self.heads):
                s = slice(h * d, (h + 1) * d)
                scores = q[:, s] @ k[:, s].T / math.sqrt(d)
                scores = np.exp(scores - scores.max(-1, keepdims=True))
                out[:, s] = (scores / scores.sum(-1, keepdims=True)) @ v[:, s]
            x = self.layer_norm(x + self.linear(out, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            up = self.linear(x, p + "intermediate.dense")
            ff = 0.5 * up * (1.0 + erf(up / math.sqrt(2.0)))
            x = self.layer_norm(x + self.linear(ff, p + "output.dense"), p + "output.LayerNorm")
        return x

    def position_ids(self, ids):
        """BERT: 0, 1, ...; XLM-R: pad_token_id + the count of non-pad tokens so far, pad tokens at pad_token_id."""
        if not self.xlmr:
            return np.arange(len(ids))
        pad = self.config.get("pad_token_id", 1)
        mask = (np.asarray(ids) != pad).astype(int)
        return np.cumsum(mask) * mask + pad

    def embed(self, ids, pooling="mean", normalize=True):
        x = self.hidden_states(ids)
        v = x.mean(0) if pooling == "mean" else x[0] if pooling == "cls" else x[-1]
        return v / max(np.linalg.norm(v), 1e-12) if normalize else v

    def classify(self, ids, type_ids):
        """The classifier's logits of one sequence (a cross-encoder's pair): pooler tanh on [CLS], then classifier;
        XLM-R: classifier.dense tanh on <s>, then classifier.out_proj."""
        first = self.hidden_states(ids, type_ids)[0]
        if self.xlmr:
            dense = np.tanh(first @ self.w["classifier.dense.weight"].T + self.w["classifier.dense.bias"])
            return dense @ self.w["classifier.out_proj.weight"].T + self.w["classifier.out_proj.bias"]
        pooled = np.tanh(self.linear(first, "pooler.dense"))
        return pooled @ self.w["classifier.weight"].T + self.w["classifier.bias"]
