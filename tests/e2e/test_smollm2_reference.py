"""SmolLM2-135M-Instruct (Q4_1 GGUF): cbatch's greedy completions of 5 raw prompts agree for 32 tokens (12 in
the sanitizer build) with an independent float64 numpy forward pass (reference_llama.py: the `gguf` package reads and
dequantizes, Hugging Face `tokenizers` tokenizes), plain and with repetition, frequency and presence
penalties. Prints the smallest top-1/top-2 logit margin, so a disagreement at a near-tie can be told
apart from a real bug."""
import json
import os

# One BLAS thread: the reference's matrices are small, and thread hand-offs cost more than they save.
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

from common import EXACT, SANITIZED, Checks, need_modules, need_smollm2, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf", "tokenizers")
from hf_reference import hf_tokenizer_from_gguf  # noqa: E402
from reference_llama import GgufLlama  # noqa: E402

NUM_TOKENS = 12 if SANITIZED else 32  # the sanitizer build: fewer steps, the same paths
PROMPTS = [
    "The three primary colors are",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Paris is the capital of",
    "Once upon a time, in a small village,",
    "The 2024 Summer Olympics were held in",
]

model = need_smollm2()
c = Checks()
work = tmpdir()
prompts = os.path.join(work, "prompts.jsonl")
PENALTIES = {"repetition_penalty": 1.3, "frequency_penalty": 0.5, "presence_penalty": 0.3}
rows = [{"id": i, "prompt": p, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True} for i, p in enumerate(PROMPTS)]
write_jsonl(prompts, rows + [dict(r, id=r["id"] + len(PROMPTS), **PENALTIES) for r in rows])
out = os.path.join(work, "out.jsonl")
run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + EXACT)
results = {r["id"]: r for r in read_jsonl(out)}

tokenizer = hf_tokenizer_from_gguf(model)
reference = GgufLlama(model)
all_prompt_ids = [tokenizer.encode(p, add_special_tokens=False).ids for p in PROMPTS]
for offset, penalties in [(0, {}), (len(PROMPTS), PENALTIES)]:
    kwargs = {"repetition": penalties.get("repetition_penalty", 1.0), "frequency": penalties.get("frequency_penalty", 0.0),
              "presence": penalties.get("presence_penalty", 0.0)}
    for i, (prompt_ids, (want, margins)) in enumerate(zip(all_prompt_ids, reference.greedy(all_prompt_ids, NUM_TOKENS, **kwargs))):
        result = results[offset + i]
        got = result["output_token_ids"]
        c.check(result["prompt_tokens"] == len(prompt_ids),
                f"prompt {i}: {result['prompt_tokens']} prompt tokens, HF tokenizers gives {len(prompt_ids)}")
        agree = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        c.check(got == want, f"prompt {i} {penalties}: first difference at token {agree} (reference margin there "
                             f"{margins[agree] if agree < len(margins) else 'n/a'}):\n  cbatch    {got}\n  reference {want}")
        print(f"prompt {i}{' with penalties' if penalties else ''}: {agree}/{NUM_TOKENS} greedy tokens agree, smallest "
              f"reference margin {min(margins):.4f}: {json.dumps(PROMPTS[i] + tokenizer.decode(want))[:90]}")
c.done()
