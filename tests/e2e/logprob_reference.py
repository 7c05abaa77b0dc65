"""Checks cbatch's logprobs and prompt_logprobs against a float64 forward pass (reference_llama.py): each
result's prompt and output tokens are run through the reference in one prefill, every row's log-softmax is
taken in float64, and each entry's log-probability and top-k must match within TOLERANCE. A top-k list is
right when each listed id's reference log-probability is the reference's value at that rank (so two
near-tied ids may come in either order) and equals cbatch's value."""
import numpy as np

TOLERANCE = 1e-4


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def reference_logprobs(model, tokens):
    """(len(tokens), vocab) float64 log-probabilities: row t predicts tokens[t + 1]."""
    cache = {"k": [None] * model.n_layers, "v": [None] * model.n_layers}
    n = len(tokens)
    logits = model.forward(np.array(tokens), np.zeros(n, dtype=np.int64), np.arange(n, dtype=np.float64), [cache])
    return log_softmax(logits)


class EntryChecker:
    def __init__(self, checks):
        self.c = checks
        self.worst = 0.0      # largest difference seen
        self.entries = 0

    def entry(self, where, k, entry, token, row):
        """entry: cbatch's {"token_id", "logprob", "top"}; row: the reference log-probabilities."""
        self.entries += 1
        diff = abs(entry["logprob"] - row[token])
        self.worst = max(self.worst, diff)
        self.c.check(entry["token_id"] == token and diff <= TOLERANCE,
                     f"{where}: token {entry['token_id']} logprob {entry['logprob']}, reference token {token} {row[token]}")
        k = min(k, len(row))
        ranked = np.sort(row)[::-1][:k]
        top = entry["top"]
        self.c.check(len(top) == k, f"{where}: {len(top)} top entries, asked {k}")
        ids = [t["token_id"] for t in top]
        self.c.check(len(set(ids)) == len(ids), f"{where}: repeated ids in top {ids}")
        for rank, t in enumerate(top[:k]):
            d = max(abs(t["logprob"] - row[t["token_id"]]), abs(row[t["token_id"]] - ranked[rank]))
            self.worst = max(self.worst, d)
            self.c.check(d <= TOLERANCE, f"{where}: top {rank} is {t['token_id']} at {t['logprob']}, reference "
                                         f"{row[t['token_id']]}, reference rank {rank} value {ranked[rank]}")

    def result(self, where, request, output_ids, logprobs, prompt_logprobs, table):
        """Checks one output (its logprobs list, and prompt_logprobs when not None) of `request` (a simple
        form input line with prompt_token_ids) against the reference table of its prompt + output ids."""
        prompt_ids = request["prompt_token_ids"]
        p = len(prompt_ids)
        tokens = prompt_ids + output_ids
        if prompt_logprobs is not None:
            self.c.check(len(prompt_logprobs) == p and prompt_logprobs[0] is None,
                         f"{where}: prompt_logprobs has {len(prompt_logprobs)} entries for {p} prompt tokens")
            for j, e in enumerate(prompt_logprobs[1:], start=1):
                self.entry(f"{where} prompt position {j}", request["prompt_logprobs"], e, tokens[j], table[j - 1])
            total = sum(e["logprob"] for e in prompt_logprobs[1:])
            want = sum(table[j - 1][tokens[j]] for j in range(1, p))
            self.c.check(abs(total - want) <= TOLERANCE * p, f"{where}: prompt log-likelihood {total}, reference {want}")
        if logprobs is not None:
            self.c.check(len(logprobs) == len(output_ids), f"{where}: {len(logprobs)} logprobs for {len(output_ids)} tokens")
            for t, e in enumerate(logprobs):
                self.entry(f"{where} output {t}", request["logprobs"], e, tokens[p + t], table[p - 1 + t])
