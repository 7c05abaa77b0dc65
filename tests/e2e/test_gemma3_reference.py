"""Gemma 3 270M (Q4_K_M GGUF: Q4_K, Q6_K, Q5_0, Q8_0 and F32 tensors): cbatch's greedy completions of 11
prompts x 32 tokens (12 in the sanitizer build), given as prompt_token_ids, agree token for token with
family_reference's float64 Gemma 3 on the weights the `gguf` package dequantizes, up to each request's
first step whose reference top-2 margin is at most 1e-3. One prompt (536 tokens) is longer than the model's 512-token window, and its
greedy path changes (at step 9) when the window is ignored, so the local layers' window really masks.
About 40 s of CPU (70 s on a busy 2-core machine): GGUFReader's parse of the 262144-token vocabulary and
the reference's float64 tied head (1.3 GB, read once per decode step) are most of it."""
import json
import os
import random
import time

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # a second BLAS thread only waits on a busy 2-core machine

from common import EXACT, SANITIZED, Checks, need_gemma3, need_modules, read_jsonl, run, tmpdir, write_jsonl  # noqa: E402

need_modules("numpy", "gguf")
import family_reference as reference  # noqa: E402

NUM_TOKENS = 12 if SANITIZED else 32  # the sanitizer build: fewer steps, the same paths
MARGIN = 1e-3
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

path = need_gemma3()
c = Checks()
work = tmpdir()
start = time.time()
proc = run(["tokenize", "--model", path], stdin="".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
prompts = [json.loads(line)["ids"] for line in proc.stdout.splitlines()]
# Past the window: <bos>, 530 random tokens, then the first prompt (its greedy path without the window
# leaves this one at step 9, where the windowed margin is 0.064: checked with model.without("window")).
rng = random.Random(3)
prompts.append([2] + [rng.randrange(1000, 60000) for _ in range(530)] + prompts[0][1:])
rows = [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
        for i, p in enumerate(prompts)]
prompts_path, out = os.path.join(work, "prompts.jsonl"), os.path.join(work, "out.jsonl")
write_jsonl(prompts_path, rows)
run(["run", prompts_path, "-o", out, "--model", path, "--device", "cpu", "--quiet", "--max-num-batched-tokens", "256"] + EXACT)
results = {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}
cbatch_s = time.time() - start

model = reference.load_gguf(path)
c.check(model.windows.count(0) == 3 and set(model.windows) == {0, 512}, f"windows {model.windows}")
compared, smallest = 0, float("inf")
for i, (ids, margins) in enumerate(reference.greedy(model, prompts, NUM_TOKENS)):
    n = reference.agreed_prefix(ids, margins, MARGIN)
    if n < NUM_TOKENS:
        print(f"prompt {i}: compared up to step {n} (reference margin {margins[n]:.2e})")
    compared += n
    smallest = min([smallest] + margins[:n])
    got = results[i]
    step = next((s for s in range(n) if s >= len(got) or got[s] != ids[s]), None)
    c.check(step is None, f"prompt {i} ({len(prompts[i])} tokens) differs first at step {step}"
                          f"{'' if step is None else f' (reference margin {margins[step]:.4f})'}\n"
                          f"  cbatch    {got}\n  reference {ids}")
print(f"compared {compared} tokens of {len(prompts)} prompts; smallest margin compared {smallest:.4f}; "
      f"cbatch {cbatch_s:.1f} s, reference {time.time() - start - cbatch_s:.1f} s")
c.check(compared >= 10 * NUM_TOKENS * 0.8, f"only {compared} tokens compared")
c.done()
