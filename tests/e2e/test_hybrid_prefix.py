"""Prefix caching of the hybrid models (recurrent-state snapshots, engine/core/state_snapshots.hpp) on the CPU backend,
on the seeded tiny models of tiny_hybrid_models.py of every recurrent kind (Qwen3.5 dense and MoE: gated DeltaNet;
LFM2: short convolutions; Granite 4.0-H and Nemotron-H: Mamba-2), over prompts that share a prefix of several blocks
and end in different suffixes (a system prompt), plus a few that share nothing:
- greedy tokens and logprobs with prefix caching are bit-identical to a run without it, across modes, token budgets,
  block sizes, sequence caps and thread counts, under preemption (a small KV cache) and under snapshot eviction
  (--state-snapshots 1 and 2); with caching, Qwen3.5's tokens equal the float64 reference's (hybrid_reference.py);
- the summary shows the hits: in sequential mode exactly the prompts the order makes hit (the first computes its
  prompt; the second, which ends inside the prefix, and the third leave the cached prefix where no snapshot was
  and save one there), each serving the blocks up to that snapshot; the snapshots' count and bytes; --state-snapshots 0 turns caching off and says so;
- n = 2 samples of shared-prefix prompts with caching: each greedy sample equals the prompt's tokens without caching.
A hit that restored the wrong snapshot (the one a block earlier) was planted once and failed every model here."""
import json
import os

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")

import hybrid_reference as reference  # noqa: E402
import tiny_hybrid_models as tiny  # noqa: E402

MODELS = ("qwen3_5", "qwen3_5_moe", "lfm2", "granite_h", "nemotron_h")
NUM_TOKENS = 8
BLOCK = 16
PREFIX_LEN = 70  # 4 whole blocks of 16 and 6 tokens
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--block-size": str(BLOCK), "--max-num-seqs": "8",
        "--threads": "2"}
CASES = [{}, {"--mode": "static"}, {"--mode": "static", "--max-num-seqs": "3"}, {"--max-num-batched-tokens": "16"},
         {"--max-num-batched-tokens": "7", "--block-size": "4"}, {"--block-size": "8"}, {"--max-num-seqs": "2"},
         {"--threads": "1"}]
PREEMPT = {"--kv-cache-blocks": "24", "--block-size": "8", "--max-num-batched-tokens": "16"}

c = Checks()
work = tmpdir()
prompts, NUM_SHARED = tiny.shared_prefix_prompts(PREFIX_LEN)
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0,
                            "ignore_eos": True, "logprobs": 1} for i, p in enumerate(prompts)])


def cbatch(model, options=None, path=prompts_path, caching=True):
    """(results by id, trace steps, summary) of a run."""
    out, trace, summary = (os.path.join(work, n) for n in ("out.jsonl", "trace.jsonl", "summary.json"))
    flags = [x for k, v in dict(BASE, **(options or {})).items() for x in (k, v)]
    if not caching:
        flags.append("--no-enable-prefix-caching")
    run(["run", path, "-o", out, "--trace", trace, "--summary", summary, "--model", model, "--device", "cpu",
         "--quiet"] + flags)
    with open(summary) as f:
        return {r["id"]: r for r in read_jsonl(out)}, read_jsonl(trace), json.load(f)


def outputs(results):
    return [(results[i]["output_token_ids"], results[i]["logprobs"]) for i in sorted(results)]


def check_sequential_hits(name, model, base):
    """Sequential mode: the hits are fixed by the order of the prompts."""
    results, steps, summary = cbatch(model, {"--mode": "sequential"})
    c.check(outputs(results) == base, f"{name} sequential: outputs change with prefix caching")
    # The second prompt computes its 60 tokens (the first saved a snapshot only at its own last whole block) and
    # saves one after 3 blocks; the third restores it and saves one at the prefix's 4 whole blocks, which the other
    # shared ones restore, and so does the last prompt (shared[0] cut short: its K/V blocks are cached a block
    # further, but shared[0] saved no snapshot there).
    whole = PREFIX_LEN // BLOCK * BLOCK
    want_tokens = 3 * BLOCK + (NUM_SHARED - 1) * whole
    c.check(summary.get("prefix_hits") == NUM_SHARED,
            f"{name} sequential: {summary.get('prefix_hits')} prefix hits, want {NUM_SHARED}")
    c.check(summary.get("cached_tokens") == want_tokens,
            f"{name} sequential: {summary.get('cached_tokens')} cached tokens, want {want_tokens}")
    c.check(summary.get("state_snapshots_restored") == summary.get("prefix_hits"),
            f"{name} sequential: {summary.get('state_snapshots_restored')} snapshots restored")
    c.check(sum(s["cached_tokens"] for s in steps) == want_tokens, f"{name} sequential: the trace's cached tokens")
    c.check(all(0 <= s["state_snapshots_cached"] <= s["state_snapshots_total"] for s in steps),
            f"{name} sequential: the trace's snapshots")


def check_model(name):
    hf_dir, _ = tiny.write_model(work, name)
    off, _, off_summary = cbatch(hf_dir, caching=False)
    base = outputs(off)
    c.check(off_summary.get("prefix_hits") == 0 and off_summary.get("cached_tokens") == 0,
            f"{name}: hits without prefix caching")
    results, steps, summary = cbatch(hf_dir)
    c.check(outputs(results) == base, f"{name}: outputs change with prefix caching")
    c.check(summary.get("prefix_caching") == "on (state snapshots)", f"{name}: prefix caching {summary.get('prefix_caching')}")
    c.check(summary.get("prefix_hits", 0) >= NUM_SHARED - 2 and summary.get("cached_tokens", 0) >= 64 * (NUM_SHARED - 2),
            f"{name}: {summary.get('prefix_hits')} hits serving {summary.get('cached_tokens')} tokens")
    total = summary.get("state_snapshots_total", 0)
    c.check(total > 0 and summary.get("state_snapshot_bytes") == total * summary["state_slot_bytes"],
            f"{name}: {total} snapshots of {summary.get('state_snapshot_bytes')} bytes")
    if name == "qwen3_5":
        expected = reference.greedy_logprobs(reference.load_hf(hf_dir), prompts, NUM_TOKENS)
        for i, (ids, margins, _) in enumerate(expected):
            k = reference.agreed_prefix(ids, margins, 1e-3)
            c.check(results[i]["output_token_ids"][:k] == ids[:k], f"{name}: prompt {i} differs from the reference")
    check_sequential_hits(name, hf_dir, base)
    for options in CASES:
        results, _, summary = cbatch(hf_dir, options)
        c.check(outputs(results) == base, f"{name}: outputs change with prefix caching and {options}")
        c.check(summary.get("prefix_hits", 0) > 0, f"{name} {options}: no prefix hit")
    results, steps, summary = cbatch(hf_dir, PREEMPT)
    c.check(outputs(results) == base, f"{name}: outputs change with prefix caching under preemption")
    c.check(sum(s["preempted"] for s in steps) > 0 and summary.get("prefix_hits", 0) > 0,
            f"{name} {PREEMPT}: {sum(s['preempted'] for s in steps)} preemptions, {summary.get('prefix_hits')} hits")
    for n in (1, 2):
        results, _, summary = cbatch(hf_dir, {"--state-snapshots": str(n)})
        c.check(outputs(results) == base, f"{name}: outputs change with --state-snapshots {n}")
        c.check(summary.get("state_snapshots_total") == n and summary.get("state_snapshots_evicted", 0) > 0,
                f"{name} --state-snapshots {n}: {summary.get('state_snapshots_evicted')} evicted")
    results, _, summary = cbatch(hf_dir, {"--state-snapshots": "0"})
    c.check(outputs(results) == base and summary.get("cached_tokens") == 0 and
            summary.get("prefix_caching") == "off (recurrent state)", f"{name} --state-snapshots 0: {summary}")
    check_forks(name, hf_dir, off)


def check_forks(name, hf_dir, off):
    """n = 2 with caching: greedy samples of shared-prefix prompts equal the prompts' tokens without caching."""
    forks = os.path.join(work, "n.jsonl")
    write_jsonl(forks, [{"id": i, "prompt_token_ids": prompts[i], "max_tokens": NUM_TOKENS, "temperature": 0,
                         "ignore_eos": True, "n": 2} for i in range(4)])
    for options in ({}, PREEMPT):
        results, _, summary = cbatch(hf_dir, options, forks)
        for i in range(4):
            outs = [o["output_token_ids"] for o in results[i]["outputs"]]
            c.check(outs == [off[i]["output_token_ids"]] * 2, f"{name} n = 2 {options}: prompt {i} samples {outs}")
        c.check(summary.get("prefix_hits", 0) > 0, f"{name} n = 2 {options}: no prefix hit")


def check_bad_flags():
    """--state-snapshots beyond the state memory, or with prefix caching off, exits 1 naming the flag."""
    hf_dir = os.path.join(work, "qwen3_5")
    for flags in (["--state-snapshots", "100000000"], ["--state-snapshots", "4", "--no-enable-prefix-caching"]):
        proc = run(["run", prompts_path, "-o", os.path.join(work, "bad.jsonl"), "--model", hf_dir, "--device", "cpu",
                    "--quiet"] + flags, expect_rc=1)
        c.check("--state-snapshots" in proc.stderr, f"{flags}: {proc.stderr}")


for model_name in MODELS:
    check_model(model_name)
check_bad_flags()

c.done()
