"""FP8 weights' accuracy on a GPU: greedy outputs of cbatch with and without --quantization fp8 (both
--dtype bf16, CUDA) on SmolLM2-135M and Gemma 3 270M, reported as the token agreement rate (tokens equal
to the bf16 output up to its first divergence, over all bf16 tokens) and the fraction of identical
outputs; then the logit statistics of fp8 vs bf16 on the dummy Llama-3.2-1B shape (max abs, mean abs,
relative RMS, top-1 agreement) from the GPU unit test that computes them.
Usage: python3 tools/fp8_accuracy.py [--build build] [--models models] [--max-tokens 128] [--json FILE]
Needs a GPU of compute capability 8.9 or newer; a model file that is absent is reported and skipped."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m": "gemma-3-270m-Q4_K_M.gguf"}
PROMPTS = [
    "The capital of France is", "Write a short poem about the sea.", "Explain how a refrigerator works.",
    "List three uses of copper.", "Once upon a time, in a small village,", "def fibonacci(n):",
    "The most important event of the 20th century was", "Translate to French: I like apples.",
    "What is 17 times 23?", "Give me a recipe for pancakes.", "Why is the sky blue?",
    "Summarize the plot of Romeo and Juliet.", "The three laws of thermodynamics are",
    "Write a haiku about autumn leaves.", "How do vaccines train the immune system?",
    "In Python, a list comprehension", "My favourite book is", "Describe a sunset over the mountains.",
    "The difference between weather and climate is", "Tips for learning a new language:",
    "SELECT name FROM users WHERE", "A good night's sleep helps because", "The theory of relativity says",
    "Dear hiring manager,", "The best way to cook rice is", "Photosynthesis converts",
    "Water boils at", "The first person to walk on the moon", "An algorithm is", "Rain forms when",
    "To be or not to be", "The stock market",
]


def greedy(args, model, quantized, work):
    prompts, out = os.path.join(work, "prompts.jsonl"), os.path.join(work, "out.jsonl")
    with open(prompts, "w") as f:
        for i, p in enumerate(PROMPTS):
            f.write(json.dumps({"id": i, "prompt": p, "max_tokens": args.max_tokens, "temperature": 0}) + "\n")
    cmd = [os.path.join(args.build, "cbatch"), "run", prompts, "-o", out, "--model", model, "--device", "cuda",
           "--dtype", "bf16", "--quiet"] + (["--quantization", "fp8"] if quantized else [])
    subprocess.run(cmd, check=True)
    with open(out) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {r["id"]: r["output_token_ids"] for r in rows}


def agreement(ref, test):
    """(tokens equal up to the first divergence / reference tokens, identical outputs / outputs)."""
    same_tokens = total_tokens = identical = 0
    for key, a in ref.items():
        b = test.get(key, [])
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        same_tokens += n
        total_tokens += len(a)
        identical += a == b
    return same_tokens / max(total_tokens, 1), identical / max(len(ref), 1)


def logit_statistics(args):
    """The MESSAGE line of the 1B-shape case of test_cuda: fp8 vs bf16 logit statistics."""
    test = os.path.join(args.build, "tests", "test_cuda")
    proc = subprocess.run([test, "-tc=*1B dummy shape*", "-s"], capture_output=True, text=True)
    found = re.search(r"fp8 vs bf16 logits over (\d+) rows: max abs ([\d.e+-]+|inf), mean abs ([\d.e+-]+), "
                      r"relative RMS ([\d.e+-]+), top-1 agreement ([\d.e+-]+)", proc.stdout)
    if found is None:
        print(proc.stdout[-2000:] + proc.stderr[-2000:])
        return {"error": f"test_cuda exited {proc.returncode} without the statistics line"}
    keys = ["rows", "max_abs", "mean_abs", "relative_rms", "top1_agreement"]
    return dict(zip(keys, [int(found.group(1))] + [float(g) for g in found.groups()[1:]]), passed=proc.returncode == 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default=os.path.join(ROOT, "models"))
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    report = {"prompts": len(PROMPTS), "max_tokens": args.max_tokens, "models": {}}
    work = tempfile.mkdtemp(prefix="cbatch-fp8-")
    for name, file in MODELS.items():
        path = os.path.join(args.models, file)
        if not os.path.exists(path):
            print(f"{name}: {path} is absent, skipped")
            continue
        token_rate, output_rate = agreement(greedy(args, path, False, work), greedy(args, path, True, work))
        report["models"][name] = {"token_agreement": token_rate, "identical_outputs": output_rate}
        print(f"{name}: greedy token agreement {token_rate:.3f} (up to the first divergence), "
              f"identical outputs {output_rate:.3f} ({len(PROMPTS)} prompts, {args.max_tokens} tokens at most)")
    report["dummy_1b_logits"] = logit_statistics(args)
    print("dummy Llama-3.2-1B shape, fp8 vs bf16 logits:", json.dumps(report["dummy_1b_logits"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0 if report["dummy_1b_logits"].get("passed") else 1


if __name__ == "__main__":
    sys.exit(main())
