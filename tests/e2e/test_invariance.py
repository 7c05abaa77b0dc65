"""The scheduler's main correctness check: on the CPU backend, outputs are bit-identical across the three
modes, token budgets (prompts chunked many ways), sequence caps, block sizes and a KV cache small enough
to force preemption, for greedy and for seeded sampling; no request is lost; static mode's trace shows
the padding it computes and continuous shows none."""
import os
import random

from common import Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
WORDS = "I dreamed of a quiet city where the robots sang softly under glass rivers and memory light".split()

rng = random.Random(1234)
rows = []
for i in range(220):
    row = {"id": f"r{i}", "max_tokens": rng.randint(1, 90)}
    if i % 3 == 0:
        row["prompt_token_ids"] = [1] + [rng.randrange(3, 512) for _ in range(rng.randint(0, 100))]
    else:
        row["prompt"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 25)))
    if i % 4 == 1:  # seeded sampling
        row.update({"temperature": 0.9, "top_p": 0.9, "top_k": 50, "seed": i})
    elif i % 4 == 2:  # sampling seeded from --seed and the id
        row.update({"temperature": 0.7, "min_p": 0.05})
    else:
        row["temperature"] = 0
    rows.append(row)

work = tmpdir()
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, rows)

configs = [
    ("continuous", 4096, 256, 16, None),
    ("continuous", 16, 256, 16, None),
    ("continuous", 37, 7, 16, None),
    ("continuous", 64, 1, 3, None),
    ("continuous", 200, 64, 4, 40),   # 40 blocks of 4 tokens: preemption
    ("static", 4096, 256, 16, None),
    ("static", 96, 7, 16, None),
    ("sequential", 16, 256, 16, None),
    ("sequential", 4096, 256, 1, None),
]
c = Checks()
reference = None
for mode, budget, seqs, block, blocks in configs:
    name = f"{mode} budget={budget} seqs={seqs} block={block} blocks={blocks}"
    out = os.path.join(work, "out.jsonl")
    trace = os.path.join(work, "trace.jsonl")
    args = ["run", prompts, "-o", out, "--trace", trace, "--mode", mode, "--max-num-batched-tokens", str(budget),
            "--max-num-seqs", str(seqs), "--block-size", str(block), "--seed", "7"] + MODEL
    if blocks:
        args += ["--kv-cache-blocks", str(blocks)]
    run(args)
    results = {r["id"]: (r["output_token_ids"], r["text"], r["finish_reason"]) for r in read_jsonl(out)}
    steps = read_jsonl(trace)
    c.check(len(results) == len(rows), f"{name}: {len(results)} results for {len(rows)} requests")
    c.check(all(s["prefill_tokens"] + s["decode_tokens"] + s["padding_tokens"] <= budget for s in steps),
            f"{name}: a step exceeds the token budget")
    c.check(all(s["num_seqs"] <= seqs for s in steps), f"{name}: a step exceeds max-num-seqs")
    c.check(steps[-1]["kv_blocks_used"] == 0, f"{name}: KV blocks still used at the end")
    padding = sum(s["padding_tokens"] for s in steps)
    preempted = sum(s["preempted"] for s in steps)
    if mode == "static":
        c.check(padding > 0, f"{name}: static mode computed no padding")
    else:
        c.check(padding == 0, f"{name}: {padding} padding tokens outside static mode")
    if blocks:
        c.check(preempted > 0, f"{name}: the small cache caused no preemption")
    if reference is None:
        reference = results
        continue
    diff = [k for k in reference if results.get(k) != reference[k]]
    c.check(not diff, f"{name}: {len(diff)} outputs differ from the first run, e.g. {diff[:3]}")
c.done()
