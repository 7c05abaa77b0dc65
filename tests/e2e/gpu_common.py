"""Helpers of the CUDA end-to-end tests that hold cbatch to a float64 reference on tiny seeded models
(test_gpu_families.py, test_gpu_hybrid.py, test_gpu_gemma4.py): the options every run starts from, the runs
of one prompt file, and the check of CUDA's greedy tokens against the reference's decisive ones, those before
each request's first step whose top-2 margin is at most MARGIN (where float32 rounding may pick either token)."""
import os

from common import leading_agreement, read_jsonl, run, write_jsonl

MARGIN = 1e-3
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--max-num-seqs": "8", "--device": "cuda",
        "--dtype": "fp32"}


def write_prompts(path, prompts, max_tokens, **fields):
    """One greedy request a token list of prompts (ids 0, 1, ...), EOS ignored, with fields added; returns path."""
    write_jsonl(path, [dict({"id": i, "prompt_token_ids": p, "max_tokens": max_tokens, "temperature": 0,
                             "ignore_eos": True}, **fields) for i, p in enumerate(prompts)])
    return path


def tokens(rows):
    """Each result row's output_token_ids; a row of n > 1 samples: each sample's."""
    return [[o["output_token_ids"] for o in r["outputs"]] if "outputs" in r else r["output_token_ids"] for r in rows]


class Runs:
    """cbatch runs of the prompt file prompts_path, writing work/out.jsonl, with BASE's options and a run's own in
    their place."""

    def __init__(self, work, prompts_path):
        self.out = os.path.join(work, "out.jsonl")
        self.prompts_path = prompts_path

    def results(self, model, options=None, check=True, path=None):
        """The result rows by id (of path's prompts when given); with check=False, the finished process and
        whether any output was written."""
        if os.path.exists(self.out):
            os.remove(self.out)
        flags = [x for k, v in dict(BASE, **(options or {})).items() for x in (k, v)]
        proc = run(["run", path or self.prompts_path, "-o", self.out, "--model", model, "--quiet"] + flags,
                   check=check)
        if not check:
            return proc, os.path.exists(self.out) and os.path.getsize(self.out) > 0
        return sorted(read_jsonl(self.out), key=lambda r: r["id"])

    def tokens(self, model, options=None, path=None):
        return tokens(self.results(model, options, path=path))


def check_decisive(c, label, got, expected, agreed_prefix, num_tokens, min_share):
    """CUDA's tokens got (a list a prompt) equal the reference's decisive ones: expected[i] starts with the
    reference's (ids, margins) of prompt i, agreed_prefix(ids, margins, MARGIN) is how many are decisive, and
    they must be at least min_share of the num_tokens a prompt. Returns each prompt's decisive count."""
    decisive = []
    for i, (ids, margins, *_) in enumerate(expected):
        n_want = agreed_prefix(ids, margins, MARGIN)
        want = ids[:n_want]
        decisive.append(n_want)
        n = leading_agreement(got[i], want)
        c.check(n == n_want, f"{label} fp32 prompt {i}: CUDA agrees with the reference for {n} of {n_want} decisive "
                             f"tokens\n  cuda      {got[i][:n_want]}\n  reference {want}")
    c.check(sum(decisive) >= min_share * len(expected) * num_tokens,
            f"{label}: only {sum(decisive)} decisive reference tokens")
    return decisive


def print_agreement(label, got, expected, num_tokens):
    """How many leading tokens of each prompt's got (bf16's) equal the reference's, printed."""
    print(f"{label} bf16 leading tokens equal to the reference per prompt:",
          [leading_agreement(g, ids) for g, (ids, *_) in zip(got, expected)], f"of {num_tokens}")
