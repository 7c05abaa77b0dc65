"""Prefix caching on the CPU backend, on a tiny random-weight model (no test data needed):
- greedy outputs are bit-identical with the cache on and off, across modes, token budgets (chunked
  prefill), block sizes, and a KV cache so small that cached blocks are evicted and sequences preempted
  over and over, on a dataset whose prompts share prefixes of several block lengths;
- every run ends with all blocks free (the engine fails a run otherwise) and the trace shows hits;
- 64 requests sharing a 300-token prefix compute the prefix once: the trace's prefill tokens are the
  prefix plus the distinct parts, and the summary's hit rate is the trace's cached / (cached + prefill);
- output lines carry cached_tokens."""
import json
import os
import random

from common import Checks, read_jsonl, run, tiny_dummy_model, tmpdir, write_jsonl

work = tmpdir()
MODEL = tiny_dummy_model(work)

rng = random.Random(99)
prefixes = [[rng.randrange(3, 320) for _ in range(n)] for n in (5, 16, 23, 40, 64, 97)]
rows = []
for i in range(90):
    prefix = prefixes[i % len(prefixes)] if i % 7 else []
    suffix = [rng.randrange(3, 320) for _ in range(rng.randint(1, 20))]
    rows.append({"id": f"r{i}", "prompt_token_ids": prefix + suffix, "max_tokens": rng.randint(1, 12),
                 "temperature": 0, "ignore_eos": True})
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, rows)

c = Checks()


def run_case(name, extra):
    out, trace, summary = (os.path.join(work, n) for n in ("out.jsonl", "trace.jsonl", "summary.json"))
    run(["run", prompts, "-o", out, "--trace", trace, "--summary", summary] + MODEL + extra)
    results = {r["id"]: r for r in read_jsonl(out)}
    steps = read_jsonl(trace)
    c.check(len(results) == len(rows), f"{name}: {len(results)} results for {len(rows)} requests")
    c.check(steps[-1]["kv_blocks_used"] == 0, f"{name}: KV blocks still used at the end")
    return results, steps, json.load(open(summary))


reference, _, _ = run_case("no cache", ["--no-enable-prefix-caching"])
cases = [
    ("continuous", ["--mode", "continuous"]),
    ("continuous budget 16", ["--max-num-batched-tokens", "16"]),
    ("continuous budget 37 block 4 seqs 5", ["--max-num-batched-tokens", "37", "--block-size", "4", "--max-num-seqs", "5"]),
    ("continuous block 1", ["--block-size", "1", "--max-num-batched-tokens", "64"]),
    ("continuous tiny cache", ["--block-size", "4", "--kv-cache-blocks", "40", "--max-num-seqs", "16"]),
    ("static", ["--mode", "static", "--max-num-seqs", "8"]),
    ("static budget 24", ["--mode", "static", "--max-num-batched-tokens", "24", "--block-size", "8"]),
    ("sequential", ["--mode", "sequential", "--block-size", "8"]),
]
for name, extra in cases:
    results, steps, summary = run_case(name, extra)
    diff = [k for k in reference if results[k]["output_token_ids"] != reference[k]["output_token_ids"]]
    c.check(not diff, f"{name}: {len(diff)} outputs differ with the cache on, e.g. {diff[:3]}")
    cached = sum(s["cached_tokens"] for s in steps)
    prefill = sum(s["prefill_tokens"] for s in steps)
    c.check(cached > 0, f"{name}: the cache served nothing")
    c.check(abs(summary["prefix_cache_hit_rate"] - cached / (cached + prefill)) < 1e-3,
            f"{name}: summary hit rate {summary['prefix_cache_hit_rate']} is not the trace's {cached / (cached + prefill)}")
    c.check(sum(r["cached_tokens"] for r in results.values()) > 0, f"{name}: no output line says cached_tokens")
    if "tiny cache" in name:
        c.check(sum(s["preempted"] for s in steps) > 0, f"{name}: the small cache caused no preemption")

# 64 requests sharing one 300-token prefix (block 16): the prefix (minus nothing: 300 is not a block
# multiple, so 18 full blocks = 288 tokens are shareable) is computed once.
shared = [rng.randrange(3, 320) for _ in range(300)]
rows64 = [{"id": i, "prompt_token_ids": shared + [rng.randrange(3, 320) for _ in range(10)], "max_tokens": 4,
           "temperature": 0, "ignore_eos": True} for i in range(64)]
write_jsonl(prompts, rows64)
rows = rows64
results, steps, summary = run_case("64 x 300-token prefix", [])
prefill = sum(s["prefill_tokens"] for s in steps)
shareable = 300 // 16 * 16
bound = 300 + 10 + 63 * (300 - shareable + 10)  # the first prompt whole, then each one's unshared tail
c.check(prefill <= bound, f"64 x 300: {prefill} prefill tokens computed, more than the prefix once plus the rest ({bound})")
c.check(sum(s["preempted"] for s in steps) == 0, "64 x 300: unexpected preemption")
c.check(sum(r["cached_tokens"] for r in results.values()) == 63 * shareable,
        f"64 x 300: output lines' cached_tokens sum to {sum(r['cached_tokens'] for r in results.values())}")
cached = sum(s["cached_tokens"] for s in steps)
c.check(abs(summary["prefix_cache_hit_rate"] - cached / (cached + prefill)) < 1e-3, "64 x 300: hit rate")
c.check(summary["prefix_cache_hit_rate"] > 0.8, f"64 x 300: hit rate {summary['prefix_cache_hit_rate']}")
c.done()
