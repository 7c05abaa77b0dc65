"""KV memory by layer kind (engine/model/kv_groups.hpp) on tiny windowed models written by tiny_models.py:
Gemma 3 (6 windowed layers and 1 full: 7 groups), gpt-oss (2 windowed, 1 full: 3 groups) and Mistral (one
windowed group). Each runs far past its window (prompts of 30-48 tokens, 100 generated; windows 8-10):
- with a --kv-cache-memory far too small for every layer to keep every block (so small that preemption
  happens), the greedy tokens equal those of a large cache and the float64 reference (family_reference.py),
  up to each request's first step with a top-2 margin of at most 1e-3;
- the summary's peak blocks of each windowed group stay within what the windows span for the sequences of a
  step, far below the full group's; each trace line's blocks per group add up to its kv_blocks_used;
- outputs are bit-identical across modes, token budgets and block sizes, with n > 1 sampled completions;
- prefix caching with a shared prompt longer than the window serves cached tokens and changes nothing,
  with a large and a small cache;
- Gemma 4 (tiny_gemma4_models.py's dense model: 6 layers, the last 2 reading layers 3 and 2's K/V, window 8):
  its shared layers hold no blocks (4 groups of 1 layer: 3 windowed, 1 full, not the 6 layers' 3 groups of 2),
  and a small --kv-cache-memory that preempts gives the large cache's tokens, far past the window."""
import json
import os
import random
import shutil

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy")
import family_reference as reference  # noqa: E402
import tiny_gemma4_models  # noqa: E402
import tiny_models  # noqa: E402

MARGIN = 1e-3
NUM_TOKENS = 100
BLOCK, BUDGET = 4, 16
MODELS = {"gemma3": 10, "gpt-oss": 8, "mistral": 9}  # name: its window

c = Checks()
work = tmpdir()
rng = random.Random(29)
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (30, 37, 41, 48)]
rows = [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
        for i, p in enumerate(prompts)]
rows.append({"id": 9, "prompt_token_ids": prompts[1], "max_tokens": 40, "temperature": 0.8, "seed": 5, "n": 2,
             "ignore_eos": True})
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, rows)
shared = [rng.randrange(3, 256) for _ in range(40)]  # longer than every window
prefix_rows = [{"id": i, "prompt_token_ids": shared + [rng.randrange(3, 256) for _ in range(6)], "max_tokens": 30,
                "temperature": 0, "ignore_eos": True} for i in range(5)]
prefix_path = os.path.join(work, "prefix.jsonl")
write_jsonl(prefix_path, prefix_rows)
# Static batches of two, a shared prompt beside an unrelated one: the second batch's shared prompt starts
# after its cached prefix and pads the columns before it, its padding rows reading the window behind it.
mixed_rows = []
for i, row in enumerate(prefix_rows[:3]):
    unrelated = [rng.randrange(3, 256) for _ in range(46)]
    mixed_rows += [dict(row, id=2 * i), dict(row, id=2 * i + 1, prompt_token_ids=unrelated)]
mixed_path = os.path.join(work, "mixed.jsonl")
write_jsonl(mixed_path, mixed_rows)


def cbatch(model, path, tag, *flags):
    """Runs with --block-size BLOCK and --max-num-batched-tokens BUDGET unless flags (pairs, or a lone flag)
    set them; returns the outputs by id (n > 1: the list of samples), the summary and the trace."""
    out, summary, trace = (os.path.join(work, f"{tag}.{x}") for x in ("jsonl", "summary.json", "trace.jsonl"))
    options = {"--block-size": str(BLOCK), "--max-num-batched-tokens": str(BUDGET)}
    for i, flag in enumerate(flags):
        if flag.startswith("--"):
            options[flag] = flags[i + 1] if i + 1 < len(flags) and not flags[i + 1].startswith("--") else None
    args = [x for k, v in options.items() for x in ([k] if v is None else [k, v])]
    run(["run", path, "-o", out, "--summary", summary, "--trace", trace, "--model", model, "--device", "cpu",
         "--quiet"] + args)
    outputs = {r["id"]: r.get("output_token_ids") or [s["output_token_ids"] for s in r["outputs"]]
               for r in read_jsonl(out)}
    return outputs, json.load(open(summary)), read_jsonl(trace)


def check_trace(label, trace, num_groups):
    ok = all(len(r["kv_group_blocks"]) == num_groups and sum(r["kv_group_blocks"]) == r["kv_blocks_used"]
             for r in trace)
    c.check(ok, f"{label}: a trace line's kv_group_blocks do not add up to its kv_blocks_used")


def span_blocks(window):  # what a window spans for one sequence: W - 1 keys behind a chunk, the chunk, misalignment
    return (window - 1 + BUDGET + BLOCK - 1) // BLOCK + 1


def check_windows(label, summary, window):
    groups = summary["kv_groups"]
    full = [g["peak_blocks"] for g in groups if g["window"] == 0]
    windowed = [g["peak_blocks"] for g in groups if g["window"] > 0]
    c.check(all(g["window"] in (0, window) for g in groups), f"{label}: groups {groups}")
    bound = summary["peak_num_seqs"] * span_blocks(window)
    c.check(windowed and max(windowed) <= bound, f"{label}: windowed groups' peak blocks {windowed} > {bound}")
    if full:
        c.check(max(windowed) * 2 < min(full), f"{label}: windowed peaks {windowed} not far below the full {full}")


for name, window in MODELS.items():
    model = os.path.join(work, name)
    tiny_models.write_hf(model, name, tiny_models.random_weights(name))
    if name == "mistral":  # bad sizes exit 1 before anything runs, naming the flag
        for value, why in (("12Q", "expected a positive size"), ("-5", "expected a positive size"),
                           ("1K", "--kv-cache-memory 1024 bytes holds 0 KV blocks")):
            err = run(["run", prompts_path, "--model", model, "--device", "cpu", "--kv-cache-memory", value],
                      expect_rc=1).stderr
            c.check(why in err and ("--kv-cache-memory " + value in err or value == "1K"), f"{value}: {err}")
        err = run(["run", prompts_path, "--model", model, "--device", "cpu", "--kv-cache-memory", "1M",
                   "--kv-cache-blocks", "8"], expect_rc=1).stderr
        c.check("give one of them" in err, f"both cache sizes: {err}")
    ref = reference.greedy(reference.load_hf(model), prompts, NUM_TOKENS)
    big, big_summary, big_trace = cbatch(model, prompts_path, f"{name}-big")
    num_groups = len(big_summary["kv_groups"])
    check_trace(f"{name} big", big_trace, num_groups)
    check_windows(f"{name} big", big_summary, window)
    # Each request decisive up to its first small margin (every one well past its window: the prompts are
    # longer than the windows already); the reference is the large cache's first.
    decisive = 0
    for i, (ids, margins) in enumerate(ref):
        want = ids[:reference.agreed_prefix(ids, margins, MARGIN)]
        decisive += len(want)
        c.check(len(want) >= 2 * window, f"{name}: prompt {i} has only {len(want)} decisive reference tokens")
        c.check(big[i][:len(want)] == want, f"{name}: prompt {i} differs from the float64 reference\n"
                                            f"  got       {big[i][:len(want)]}\n  reference {want}")
    c.check(decisive >= len(prompts) * NUM_TOKENS // 2, f"{name}: only {decisive} decisive reference tokens")

    # A pool of 2 sequences' worth of blocks (the windowed groups' only what the windows span).
    longest = max(len(p) for p in prompts) + NUM_TOKENS
    full_groups = sum(1 for g in big_summary["kv_groups"] if g["window"] == 0)
    per_seq = full_groups * -(-longest // BLOCK) + (num_groups - full_groups) * span_blocks(window)
    every_block = num_groups * -(-longest // BLOCK)  # what one sequence would hold if every layer kept all
    pool = per_seq * 2
    c.check(pool < every_block, f"{name}: the small pool ({pool} blocks) would fit every block of a sequence")
    memory = str(pool * big_summary["kv_block_bytes"])
    small, small_summary, small_trace = cbatch(model, prompts_path, f"{name}-small", "--kv-cache-memory", memory)
    c.check(small_summary["kv_blocks_total"] == pool, f"{name}: --kv-cache-memory {memory} gave "
                                                      f"{small_summary['kv_blocks_total']} blocks, not {pool}")
    c.check(small_summary["preemptions"] > 0, f"{name}: the small cache caused no preemption")
    c.check(small_summary["peak_kv_blocks"] <= pool, f"{name}: peak {small_summary['peak_kv_blocks']} > {pool}")
    check_trace(f"{name} small", small_trace, num_groups)
    check_windows(f"{name} small", small_summary, window)
    c.check(small == big, f"{name}: a small --kv-cache-memory changes the outputs")

    for flags in (["--mode", "static"], ["--mode", "sequential"], ["--max-num-batched-tokens", "7"],
                  ["--block-size", "8"], ["--block-size", "1", "--max-num-batched-tokens", "5"],
                  ["--kv-cache-memory", memory, "--max-num-seqs", "2", "--no-enable-prefix-caching"]):
        got, _, _ = cbatch(model, prompts_path, f"{name}-{len(flags)}", *flags)
        c.check(got == big, f"{name}: outputs change with {' '.join(flags)}")

    cached, cached_summary, _ = cbatch(model, prefix_path, f"{name}-prefix")
    plain, _, _ = cbatch(model, prefix_path, f"{name}-plain", "--no-enable-prefix-caching")
    c.check(cached == plain, f"{name}: prefix caching changes the outputs")
    c.check(cached_summary["cached_tokens"] >= 4 * (40 // BLOCK - 1) * BLOCK,
            f"{name}: only {cached_summary['cached_tokens']} prompt tokens served by the prefix cache")
    squeezed, _, _ = cbatch(model, prefix_path, f"{name}-prefix-small", "--kv-cache-memory", memory)
    c.check(squeezed == plain, f"{name}: prefix caching in a small cache changes the outputs")
    static, static_summary, _ = cbatch(model, mixed_path, f"{name}-static", "--mode", "static", "--max-num-seqs", "2")
    static_plain, _, _ = cbatch(model, mixed_path, f"{name}-static-plain", "--no-enable-prefix-caching")
    c.check(static_summary["cached_tokens"] > 0, f"{name}: no prefix hit in the static batches")
    c.check(static == static_plain, f"{name}: static batches with prefix hits change the outputs")
# Gemma 4: K/V groups of the layers that write K/V only; the shared layers read their source's group.
model = os.path.join(work, "gemma4-dense")
tiny_gemma4_models.write_hf(model, "dense", tiny_gemma4_models.random_weights("dense"))
big, big_summary, big_trace = cbatch(model, prompts_path, "gemma4-big")
groups = big_summary["kv_groups"]
c.check(big_summary["kv_layers_per_block"] == 1 and sorted(g["window"] for g in groups) == [0, 8, 8, 8],
        f"gemma4: the shared layers hold blocks: {big_summary['kv_layers_per_block']} layers per block, groups {groups}")
check_trace("gemma4 big", big_trace, len(groups))
check_windows("gemma4 big", big_summary, 8)
longest = max(len(p) for p in prompts) + NUM_TOKENS
pool = 2 * (-(-longest // BLOCK) + 3 * span_blocks(8))
memory = str(pool * big_summary["kv_block_bytes"])
small, small_summary, small_trace = cbatch(model, prompts_path, "gemma4-small", "--kv-cache-memory", memory)
c.check(small_summary["kv_blocks_total"] == pool, f"gemma4: {small_summary['kv_blocks_total']} blocks, not {pool}")
c.check(small_summary["preemptions"] > 0, "gemma4: the small cache caused no preemption")
check_trace("gemma4 small", small_trace, len(groups))
check_windows("gemma4 small", small_summary, 8)
c.check(small == big, "gemma4: a small --kv-cache-memory changes the outputs")
c.check(all(len(big[i]) == NUM_TOKENS for i in range(len(prompts))), "gemma4: short outputs")
shutil.rmtree(work, ignore_errors=True)
c.done()
