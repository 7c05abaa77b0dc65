"""Prefix caching of the hybrid models on the CUDA backend (skipped without a GPU): the recurrent-state snapshots
of engine/core/state_snapshots.hpp in device slots beyond the running ones (CudaBackendOptions::state_snapshots),
on the tiny seeded models of tiny_hybrid_models.py of every recurrent kind (Qwen3.5: gated DeltaNet; LFM2: short
convolutions; Granite 4.0-H and Nemotron-H: Mamba-2), over test_hybrid_prefix.py's prompts (a shared prefix of four
blocks and more, then different suffixes, and some that share nothing), with --dtype fp32:
- the greedy tokens with prefix caching equal those of a run without it: in each mode, with small token budgets
  (a suffix prefilled in chunks after a restored state), under preemption and under snapshot eviction
  (--state-snapshots 1), and for n = 2 samples (a fork of a restored state);
- the summary says caching is on with state snapshots, and the hits: in sequential mode exactly as many as on the
  CPU; --state-snapshots 0 turns caching off and says so.
Qwen3.5 runs the token-by-token delta rule (--cuda-kernel deltanet=recurrent) and the Mamba-2 models the
token-by-token scan (mamba-scan=recurrent): the chunked kernels round by their chunks, which a restored prefix
moves, and the equality asserted here is bit for bit.
A snapshot copied to the wrong slot, or a restored state zeroed as a new sequence's, fails here by name."""
import json
import os

from common import Checks, need_cuda_device, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_cuda_device()
need_modules("numpy", "gguf")
import tiny_hybrid_models as tiny  # noqa: E402

MODELS = ("qwen3_5", "lfm2", "granite_h", "nemotron_h")
KERNELS = {"qwen3_5": {"--cuda-kernel": "deltanet=recurrent"}, "granite_h": {"--cuda-kernel": "mamba-scan=recurrent"},
           "nemotron_h": {"--cuda-kernel": "mamba-scan=recurrent"}}
NUM_TOKENS = 8
BLOCK = 16
PREFIX_LEN = 70  # 4 whole blocks of 16 and 6 tokens
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--block-size": str(BLOCK), "--max-num-seqs": "8",
        "--device": "cuda", "--dtype": "fp32"}
CASES = [{}, {"--mode": "static"}, {"--max-num-batched-tokens": "16"}, {"--max-num-batched-tokens": "7", "--block-size": "8"},
         {"--kv-cache-blocks": "24", "--block-size": "8", "--max-num-batched-tokens": "16"}, {"--state-snapshots": "1"}]

c = Checks()
work = tmpdir()
prompts, NUM_SHARED = tiny.shared_prefix_prompts(PREFIX_LEN)
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0,
                            "ignore_eos": True} for i, p in enumerate(prompts)])
forks_path = os.path.join(work, "n.jsonl")
write_jsonl(forks_path, [{"id": i, "prompt_token_ids": prompts[i], "max_tokens": NUM_TOKENS, "temperature": 0,
                          "ignore_eos": True, "n": 2} for i in range(4)])


def cbatch(model, options=None, path=prompts_path, caching=True):
    """(results by id, summary) of a run (with the kernel flags of KERNELS for the model's name)."""
    out, summary = os.path.join(work, "out.jsonl"), os.path.join(work, "summary.json")
    kernel = KERNELS.get(os.path.basename(model), {})
    flags = [x for k, v in dict(BASE, **kernel, **(options or {})).items() for x in (k, v)]
    if not caching:
        flags.append("--no-enable-prefix-caching")
    run(["run", path, "-o", out, "--summary", summary, "--model", model, "--quiet"] + flags)
    with open(summary) as f:
        return {r["id"]: r for r in read_jsonl(out)}, json.load(f)


def tokens(results):
    return [results[i]["output_token_ids"] for i in sorted(results)]


def check_model(name):
    hf_dir, _ = tiny.write_model(work, name)
    off, off_summary = cbatch(hf_dir, caching=False)
    base = tokens(off)
    c.check(off_summary.get("prefix_hits") == 0, f"{name}: hits without prefix caching")
    results, summary = cbatch(hf_dir)
    c.check(summary.get("prefix_caching") == "on (state snapshots)", f"{name}: prefix caching {summary.get('prefix_caching')}")
    total = summary.get("state_snapshots_total", 0)
    c.check(total > 0 and summary.get("state_snapshot_bytes") == total * summary["state_slot_bytes"],
            f"{name}: {total} snapshots of {summary.get('state_snapshot_bytes')} bytes")
    results, summary = cbatch(hf_dir, {"--mode": "sequential"})
    c.check(tokens(results) == base, f"{name} sequential: outputs change with prefix caching")
    c.check(summary.get("prefix_hits") == NUM_SHARED and summary.get("state_snapshots_restored") == NUM_SHARED,
            f"{name} sequential: {summary.get('prefix_hits')} prefix hits, "
            f"{summary.get('state_snapshots_restored')} restored, want {NUM_SHARED}")
    for options in CASES:
        results, summary = cbatch(hf_dir, options)
        c.check(tokens(results) == base, f"{name}: outputs change with prefix caching and {options}")
        c.check(summary.get("prefix_hits", 0) > 0, f"{name} {options}: no prefix hit")
    results, summary = cbatch(hf_dir, {"--state-snapshots": "0"})
    c.check(tokens(results) == base and summary.get("prefix_caching") == "off (recurrent state)",
            f"{name} --state-snapshots 0: prefix caching {summary.get('prefix_caching')}")
    results, summary = cbatch(hf_dir, path=forks_path)
    for i in range(4):
        outs = [o["output_token_ids"] for o in results[i]["outputs"]]
        c.check(outs == [base[i]] * 2, f"{name} n = 2: prompt {i} samples {outs}")
    c.check(summary.get("prefix_hits", 0) > 0, f"{name} n = 2: no prefix hit")


for model_name in MODELS:
    check_model(model_name)
c.done()
