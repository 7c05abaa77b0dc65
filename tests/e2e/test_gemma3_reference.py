"""Gemma 3 270M (Q4_K_M GGUF: Q4_K, Q6_K, Q5_0, Q8_0 and F32 tensors): cbatch's greedy completions of 10
prompts x 32 tokens agree token for token with an independent float64 numpy Gemma 3
(reference_gemma3.py, weights dequantized by the `gguf` package), wherever the reference's top-1/top-2
margin is above 1e-3 (a request is compared up to its first closer call). One prompt is longer than the
model's 512-token sliding window, with a greedy path that changes without the window, so the local layers'
window really masks."""
import os

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "2")

from common import Checks, need_gemma3, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
from reference_gemma3 import GgufGemma3  # noqa: E402

NUM_TOKENS = 32
TEXTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The three primary colors are",
    "Water boils at",
    "List three animals that live in the ocean:",
    "En français, « bonjour » veut dire",
    "The quick brown fox",
    "1, 2, 3, 5, 8, 13,",
    "Photosynthesis is the process by which",
]
MARGIN = 1e-3

model = need_gemma3()
c = Checks()
work = tmpdir()
texts = os.path.join(work, "texts.jsonl")
write_jsonl(texts, [{"text": t} for t in TEXTS])
proc = run(["tokenize", "--model", model], stdin=open(texts).read())
prompts = [row["ids"] for row in (__import__("json").loads(line) for line in proc.stdout.splitlines())]
# A prompt past the 512-token window: 530 random tokens, then the first prompt. Its greedy path changes when
# the window is ignored (checked: the reference without a window leaves it at step 9, margin 0.064).
rng = __import__("random").Random(3)
prompts.append([2] + [rng.randrange(1000, 60000) for _ in range(530)] + prompts[0][1:])
rows = [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
        for i, p in enumerate(prompts)]
prompts_path, out = os.path.join(work, "prompts.jsonl"), os.path.join(work, "out.jsonl")
write_jsonl(prompts_path, rows)
run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet", "--max-num-batched-tokens", "256"])
results = {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}
if os.environ.get("CBATCH_SANITIZED") == "1":  # the sanitizer build checks the run above; numerics are checked
    c.check(len(results) == len(prompts), "sanitized run: a request is missing")  # by the plain build
    c.done()

reference = GgufGemma3(model)
compared = 0
smallest = float("inf")
for i, (ref_ids, margins) in enumerate(reference.greedy(prompts, NUM_TOKENS)):
    got = results[i]
    for step, (want, margin) in enumerate(zip(ref_ids, margins)):
        if margin <= MARGIN:
            print(f"prompt {i}: stops comparing at step {step} (reference margin {margin:.2e})")
            break
        smallest = min(smallest, margin)
        compared += 1
        if got[step] != want:
            c.check(False, f"prompt {i} step {step}: cbatch {got[step]}, reference {want} (margin {margin:.4f})\n"
                           f"  cbatch    {got}\n  reference {ref_ids}")
            break
    else:
        c.check(True, "")
print(f"compared {compared} tokens of {len(prompts)} prompts; smallest margin compared {smallest:.4f}")
c.check(compared >= 10 * NUM_TOKENS * 0.8, f"only {compared} tokens compared")
c.done()
