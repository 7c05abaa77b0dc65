#!/usr/bin/env python3
"""How far cbatch's fast CPU path (8-bit activations, --cpu-precision fast) moves a model's log-probabilities
from the exact fp32 path, teacher-forced: the same texts scored by both (prompt_logprobs, one generated token
each), every token's log-probability compared. Prints the tokens compared, the mean and largest |difference|,
the mean signed difference (the change in log-perplexity) and how often both paths rank the same token first.
Texts: the paragraphs of over 400 characters in the given Markdown files (default: docs/**/*.md of this
repository), each cut at 600 characters, up to --max-texts.
    tools/cpu_precision_logprobs.py --cbatch build/cbatch --model models/gemma-3-270m-Q4_K_M.gguf \\
        [--cbatch-baseline OTHER_BIN] [--max-texts 40] [--threads 2] [FILE.md ...]
--cbatch-baseline: a second binary whose fast path is measured against the same exact reference (the first
binary's), to compare two versions of the fast path in one run."""
import argparse
import glob
import json
import os
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def texts_of(files, max_texts):
    texts = []
    for path in files:
        with open(path) as f:
            for para in f.read().split("\n\n"):
                para = re.sub(r"\s+", " ", para).strip()
                if len(para) > 400 and not para.startswith("|") and "```" not in para:
                    texts.append(para[:600])
    return texts[:max_texts]


def prompt_logprobs(binary, model, prompts, precision, threads, work):
    out = os.path.join(work, f"{os.path.basename(binary)}-{precision}.jsonl")
    subprocess.run([binary, "run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet",
                    "--threads", str(threads), "--cpu-precision", precision], check=True)
    with open(out) as f:
        return {r["id"]: r["prompt_logprobs"][1:] for r in map(json.loads, f)}


def compare(fast, exact):
    n = same_top = 0
    abs_sum = signed_sum = largest = 0.0
    for key, want in exact.items():
        for got, ref in zip(fast[key], want):
            d = got["logprob"] - ref["logprob"]
            n += 1
            abs_sum += abs(d)
            signed_sum += d
            largest = max(largest, abs(d))
            same_top += got["top"][0]["token_id"] == ref["top"][0]["token_id"]
    return {"tokens": n, "mean_abs": abs_sum / n, "max_abs": largest, "mean": signed_sum / n,
            "same_top1": same_top / n}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="Markdown files of text (default: the repository's docs)")
    ap.add_argument("--cbatch", default=os.environ.get("CBATCH_BIN", "build/cbatch"))
    ap.add_argument("--cbatch-baseline", help="a second binary's fast path, against the same exact reference")
    ap.add_argument("--model", required=True, help="a GGUF file (or any model the CPU backend runs)")
    ap.add_argument("--max-texts", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    texts = texts_of(files, args.max_texts)
    if not texts:
        raise SystemExit("error: no paragraph of over 400 characters in the given files")
    with tempfile.TemporaryDirectory() as work:
        prompts = os.path.join(work, "texts.jsonl")
        with open(prompts, "w") as f:
            for i, text in enumerate(texts):
                f.write(json.dumps({"id": str(i), "prompt": text, "max_tokens": 1, "temperature": 0,
                                    "prompt_logprobs": 1}) + "\n")
        exact = prompt_logprobs(args.cbatch, args.model, prompts, "exact", args.threads, work)
        for binary in [b for b in (args.cbatch_baseline, args.cbatch) if b]:
            r = compare(prompt_logprobs(binary, args.model, prompts, "fast", args.threads, work), exact)
            print(f"{binary}: fast vs exact over {r['tokens']} tokens of {len(texts)} texts: mean |dlogprob| "
                  f"{r['mean_abs']:.4f}, largest {r['max_abs']:.3f}, mean dlogprob {r['mean']:+.4f}, "
                  f"same top-1 token {100 * r['same_top1']:.2f}%")


if __name__ == "__main__":
    main()
