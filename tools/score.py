#!/usr/bin/env python3
"""Scoring with cbatch's prompt_logprobs: the perplexity of a text file, or the answer of a multiple-choice
item. Each writes a JSONL of scoring requests (max_tokens 0, prompt_logprobs 0: the prompt's log-probabilities
only, nothing generated), runs `cbatch run` on it and reads the output lines.

    tools/score.py perplexity --model M.gguf book.txt [--window 512]
    tools/score.py choice --model M.gguf item.json     # {"question": "...", "choices": ["...", ...]}

perplexity: the text's tokens (without BOS) in windows of at most --window tokens (and the model's context),
each window a request of its own after the model's BOS; perplexity = exp(-(sum of logprobs) / tokens scored).
choice: one request per question + choice; a choice's score is the sum of the log-probabilities of its own
tokens (those after the tokens it shares with the question alone), also shown per token; the answer is
the highest sum. Extra arguments after -- go to `cbatch run` (--device, --threads, ...)."""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

CBATCH = os.environ.get("CBATCH_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "cbatch"))


def cbatch(args, stdin=None):
    proc = subprocess.run([CBATCH] + args, input=stdin, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cbatch {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def tokenize(model, texts, special):
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    out = cbatch(["tokenize", "--model", model] + ([] if special else ["--no-special"]), stdin)
    return [json.loads(line)["ids"] for line in out.splitlines() if line.strip()]


def context_length(model):
    for line in cbatch(["inspect", "--model", model]).splitlines():
        if line.startswith("context:"):
            return int(line.split(":")[1])
    sys.exit("cbatch inspect printed no context length")


def score(model, prompts, extra):
    """The prompt_logprobs list of each prompt (token id lists), by position (the first is None)."""
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "score.jsonl")
        with open(path, "w") as f:
            for i, ids in enumerate(prompts):
                f.write(json.dumps({"id": i, "prompt_token_ids": ids, "max_tokens": 0, "prompt_logprobs": 0}) + "\n")
        lines = [json.loads(line) for line in cbatch(["run", path, "--model", model, "--quiet", "-o", "-"] + extra).splitlines()]
    results = {r["id"]: r for r in lines}
    for r in lines:
        if "error" in r:
            sys.exit(f"request {r['id']}: {r['error']['message']}")
    return [[None if e is None else e["logprob"] for e in results[i]["prompt_logprobs"]] for i in range(len(prompts))]


def perplexity(args, extra):
    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    (with_special,), (plain,) = tokenize(args.model, [text], True), tokenize(args.model, [text], False)
    bos = with_special[:len(with_special) - len(plain)] if with_special[-len(plain):] == plain else []
    window = max(1, min(args.window, context_length(args.model) - 1 - len(bos)))
    prompts = [bos + plain[i:i + window] for i in range(0, len(plain), window)]
    total, count = 0.0, 0
    for logprobs in score(args.model, prompts, extra):
        scored = logprobs[len(bos):] if bos else logprobs[1:]
        total += sum(scored)
        count += len(scored)
    print(json.dumps({"tokens_scored": count, "log_likelihood": total, "perplexity": math.exp(-total / count)}))


def choice(args, extra):
    with open(args.file, encoding="utf-8") as f:
        item = json.load(f)
    question, choices = item["question"], item["choices"]
    (q_ids,) = tokenize(args.model, [question], True)
    full = tokenize(args.model, [question + c for c in choices], True)
    scores = []
    for c, ids, logprobs in zip(choices, full, score(args.model, full, extra)):
        shared = next((i for i, (a, b) in enumerate(zip(q_ids, ids)) if a != b), min(len(q_ids), len(ids)))
        own = logprobs[max(shared, 1):]
        scores.append({"choice": c, "tokens": len(own), "logprob": sum(own), "per_token": sum(own) / max(len(own), 1)})
    best = max(range(len(choices)), key=lambda i: scores[i]["logprob"])
    print(json.dumps({"answer": best, "choice": choices[best], "scores": scores}))


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("perplexity", help="perplexity of a text file")
    p.add_argument("file")
    p.add_argument("--model", required=True)
    p.add_argument("--window", type=int, default=512, help="tokens a request scores at most")
    c = sub.add_parser("choice", help="answer of a multiple-choice item")
    c.add_argument("file")
    c.add_argument("--model", required=True)
    args = parser.parse_args(argv)
    (perplexity if args.command == "perplexity" else choice)(args, extra)


if __name__ == "__main__":
    main()
