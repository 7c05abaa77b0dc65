"""n > 1 completions per request on the CPU backend, on a tiny random-weight model (no test data needed):
the prompt is prefilled once (trace) and its blocks shared, the last partial one copied on write; sample i
equals the same request run alone with n = 1 and seed + i (or --seed + i without a seed field); greedy
samples are identical, sampled ones differ; outputs are identical across modes, budgets, block sizes, a
KV cache small enough to preempt, and prefix caching on or off; bad n values are error lines; an n > 1
request is one line for --resume; the OpenAI form gets n choices."""
import json
import os
import random

from common import Checks, read_jsonl, run, tiny_dummy_model, tmpdir, write_jsonl

work = tmpdir()
MODEL = tiny_dummy_model(work, max_position_embeddings=512)
c = Checks()


def run_rows(rows, extra=(), expect_rc=0, name="run"):
    prompts, out, trace = (os.path.join(work, n) for n in ("p.jsonl", "o.jsonl", "t.jsonl"))
    write_jsonl(prompts, rows)
    run(["run", prompts, "-o", out, "--trace", trace] + MODEL + list(extra), expect_rc=expect_rc)
    results = read_jsonl(out)
    steps = read_jsonl(trace)
    c.check(not steps or steps[-1]["kv_blocks_used"] == 0, f"{name}: KV blocks still used at the end")
    return {r["id"]: r for r in results}, steps


def samples(result):
    return [o["output_token_ids"] for o in result["outputs"]]


prompt = list(range(3, 40))  # 37 tokens: two full blocks of 16 and a shared partial one
# Greedy: one prefill, identical samples.
res, steps = run_rows([{"id": "g", "prompt_token_ids": prompt, "max_tokens": 8, "n": 4, "temperature": 0,
                        "ignore_eos": True}], name="greedy")
c.check(sum(s["prefill_tokens"] for s in steps) == len(prompt), "n = 4: the prompt was not prefilled exactly once")
c.check(len(res["g"]["outputs"]) == 4 and all(o == samples(res["g"])[0] for o in samples(res["g"])),
        "greedy samples differ")
c.check([o["index"] for o in res["g"]["outputs"]] == [0, 1, 2, 3], "sample indices")
c.check(res["g"]["completion_tokens"] == 32, "completion_tokens is the samples' sum")

# Sampled: sample i equals n = 1 with seed + i (without a seed field it is --seed + i, which also reseeds
# this dummy model's weights: test_sampler checks that derivation).
base = {"prompt_token_ids": prompt, "max_tokens": 10, "temperature": 0.9, "ignore_eos": True}
rows = [dict(base, id="s", n=4, seed=5), dict(base, id="u", n=3)]
res, _ = run_rows(rows, ["--seed", "11"], name="sampled")
c.check(len({tuple(o) for o in samples(res["s"])}) > 1, "sampled completions are all the same")
for i in range(4):
    alone, _ = run_rows([dict(base, id="s", seed=5 + i)], ["--seed", "11"], name=f"alone {i}")
    c.check(alone["s"]["output_token_ids"] == samples(res["s"])[i], f"sample {i} != the request alone with seed {5 + i}")
alone, _ = run_rows([dict(base, id="u")], ["--seed", "11"], name="unseeded alone")
c.check(alone["u"]["output_token_ids"] == samples(res["u"])[0], "unseeded sample 0 != the request alone")
c.check(len({tuple(o) for o in samples(res["u"])}) > 1, "unseeded sampled completions are all the same")

# With penalties (the sampler changes its row of logits in place: each sample needs its own copy).
pen = dict(base, id="p", repetition_penalty=1.3, frequency_penalty=0.5, presence_penalty=0.2)
res, _ = run_rows([dict(pen, n=3, seed=9)], ["--seed", "11"], name="penalties")
for i in range(3):
    alone, _ = run_rows([dict(pen, seed=9 + i)], ["--seed", "11"], name=f"penalized alone {i}")
    c.check(alone["p"]["output_token_ids"] == samples(res["p"])[i], f"penalized sample {i} != the request alone")

# Invariance across modes, budgets, block sizes, preemption and the prefix cache.
rng = random.Random(5)
shared = [rng.randrange(3, 320) for _ in range(21)]
rows = []
for i in range(30):
    row = {"id": f"r{i}", "prompt_token_ids": (shared if i % 2 else []) + [rng.randrange(3, 320) for _ in range(rng.choice([1, 11, 16, 27]))],
           "max_tokens": rng.randint(1, 14), "n": [1, 2, 3, 5][i % 4], "ignore_eos": True}
    row.update({"temperature": 0} if i % 3 == 0 else {"temperature": 0.8, "top_p": 0.9, "seed": i})
    rows.append(row)
reference, _ = run_rows(rows, ["--no-enable-prefix-caching"], name="reference")
for name, extra in [("continuous", []), ("budget 8 block 4", ["--max-num-batched-tokens", "8", "--block-size", "4"]),
                    ("seqs 5", ["--max-num-seqs", "5"]), ("block 1", ["--block-size", "1"]),
                    ("tiny cache", ["--block-size", "4", "--kv-cache-blocks", "40", "--max-num-seqs", "16"]),
                    ("static", ["--mode", "static", "--max-num-seqs", "9"]),
                    ("static block 4", ["--mode", "static", "--block-size", "4", "--kv-cache-blocks", "120"]),
                    ("sequential", ["--mode", "sequential"])]:
    res, steps = run_rows(rows, extra, name=name)
    c.check(len(res) == len(rows), f"{name}: {len(res)} results for {len(rows)} requests")
    diff = [k for k in reference if json.dumps(reference[k].get("outputs", reference[k].get("output_token_ids"))) !=
            json.dumps(res[k].get("outputs", res[k].get("output_token_ids")))]
    c.check(not diff, f"{name}: {len(diff)} requests differ, e.g. {diff[:3]}")
    if name == "tiny cache":
        c.check(sum(s["preempted"] for s in steps) > 0, "tiny cache: no preemption")
    if "static" not in name and name != "sequential":
        c.check(max(s["num_seqs"] for s in steps) <= int((extra + ["--max-num-seqs", "256"])[
            (extra + ["--max-num-seqs", "256"]).index("--max-num-seqs") + 1]), f"{name}: more sequences than the cap")

# Bad n: error lines, the rest runs.
bad = [{"id": f"b{i}", "prompt_token_ids": [5, 6], "n": n} for i, n in enumerate([0, -1, 1.5, "3", 2000, True])]
bad.append({"id": "cap", "prompt_token_ids": [5, 6], "n": 9})
bad.append({"id": "ok", "prompt_token_ids": [5, 6], "n": 2, "max_tokens": 2})
res, _ = run_rows(bad, ["--max-num-seqs", "8"], expect_rc=2, name="bad n")
for i in range(6):
    c.check("error" in res[f"b{i}"] and "'n'" in res[f"b{i}"]["error"]["message"], f"bad n #{i}: {res[f'b{i}']}")
c.check("error" in res["cap"] and "max-num-seqs" in res["cap"]["error"]["message"], f"n over --max-num-seqs: {res['cap']}")
c.check(len(res["ok"]["outputs"]) == 2, "the good request next to the bad ones")
res, _ = run_rows([{"id": "kv", "prompt_token_ids": list(range(3, 30)), "n": 50, "max_tokens": 20}],
                  ["--kv-cache-blocks", "40", "--block-size", "4", "--max-num-seqs", "64"], expect_rc=2, name="kv")
c.check("KV blocks" in res["kv"]["error"]["message"], f"n beyond the KV cache: {res['kv']}")

res, _ = run_rows([{"id": "st", "prompt_token_ids": [5, 6, 7], "n": 12, "max_tokens": 3},
                   {"id": "ok", "prompt_token_ids": [5, 6, 7], "n": 2, "max_tokens": 3}],
                  ["--mode", "static", "--max-num-batched-tokens", "8"], expect_rc=2, name="static cap")
c.check("error" in res["st"] and len(res["ok"]["outputs"]) == 2, f"static: n over the batch's rows: {res['st']}")

# OpenAI form: n choices; --resume: one line per request.
prompts, out = os.path.join(work, "oa.jsonl"), os.path.join(work, "oa-out.jsonl")
write_jsonl(prompts, [{"custom_id": "x", "method": "POST", "url": "/v1/completions",
                       "body": {"model": "m", "prompt": "hi", "max_tokens": 3, "n": 3, "temperature": 0.7, "seed": 1}}])
run(["run", prompts, "-o", out] + MODEL)
body = read_jsonl(out)[0]["response"]["body"]
c.check([ch["index"] for ch in body["choices"]] == [0, 1, 2], f"OpenAI choices {body['choices']}")
c.check(body["usage"]["completion_tokens"] == 9, "OpenAI usage sums the choices")
run(["run", prompts, "-o", out, "--resume"] + MODEL)
c.check(len(read_jsonl(out)) == 1, "--resume appended to a finished n > 1 request")
c.done()
