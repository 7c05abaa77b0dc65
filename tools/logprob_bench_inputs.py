#!/usr/bin/env python3
"""Writes the inputs of the logprobs cost figures (docs/benchmarks): into DIR, score.jsonl (256 prompts of
256 random token ids, max_tokens 0, prompt_logprobs 1) and plain.jsonl (the same prompts, max_tokens 1),
gen.jsonl (64 prompts of 32 ids, 128 greedy tokens, ignore_eos) and gen_lp.jsonl (the same with logprobs 5).
Token ids are drawn from 3..VOCAB-1 (default 49152, SmolLM2's), seeded, so every run writes the same files."""
import json
import os
import random
import sys


def write(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    vocab = int(sys.argv[2]) if len(sys.argv) > 2 else 49152
    os.makedirs(out, exist_ok=True)
    r = random.Random(0)
    prompts = [[1] + [r.randrange(3, vocab) for _ in range(255)] for _ in range(256)]
    write(os.path.join(out, "score.jsonl"),
          [{"id": i, "prompt_token_ids": p, "max_tokens": 0, "prompt_logprobs": 1} for i, p in enumerate(prompts)])
    write(os.path.join(out, "plain.jsonl"), [{"id": i, "prompt_token_ids": p, "max_tokens": 1} for i, p in enumerate(prompts)])
    gen = [{"id": i, "prompt_token_ids": [1] + [r.randrange(3, vocab) for _ in range(31)], "max_tokens": 128,
            "temperature": 0, "ignore_eos": True} for i in range(64)]
    write(os.path.join(out, "gen.jsonl"), gen)
    write(os.path.join(out, "gen_lp.jsonl"), [dict(row, logprobs=5) for row in gen])


if __name__ == "__main__":
    main()
