"""Qwen3.5 (gated DeltaNet layers beside gated attention) on the CPU backend, on the seeded tiny model of
tiny_hybrid_models.py written as a Hugging Face directory (multimodal config, a vision tower and an MTP block
to skip) and as a GGUF the way llama.cpp's converter writes it (value heads tiled, ssm_a = -exp(A_log), norms
stored as 1 + w, the MTP block counted in block_count):
- cbatch's greedy tokens of each file equal the float64 reference's of that file (hybrid_reference.py), up to
  each request's first step with a top-2 margin of at most 1e-3, and the chosen tokens' logprobs are within
  2e-4 of the reference's; the directory and the GGUF give the same tokens; inspect names the architecture,
  the layer kinds and the skipped parts;
- outputs are bit-identical across modes, token budgets (chunked prefill down to 1 token a step), block
  sizes, thread counts, sequence caps and a KV cache small enough to preempt (the trace shows preemptions
  and state slots, all returned: the run checks that); the summary says prefix caching is on with state
  snapshots (test_hybrid_prefix.py checks what it serves);
- n > 1 forks copy the recurrent state: greedy samples equal the request alone, sampled sample i equals the
  request alone with seed + i;
- bad files exit 1 before anything runs, naming the tensor or key: a missing conv or decay tensor, head
  counts that do not divide, a state size or conv kernel that disagrees with the tensors, an unknown layer
  type (on the dense model); the CUDA backend's refusal is in its config checks (no GPU here to run it)."""
import copy
import json
import os
import random

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

import hybrid_reference as reference  # noqa: E402
import tiny_hybrid_models as tiny  # noqa: E402

NAME = "qwen3_5"  # the bad files are made of it
# Per model: what inspect says of its layers, and whether every invariance case runs (the MoE: a few).
MODELS = {"qwen3_5": ("2 gated DeltaNet and 2 attention layers", True),
          "qwen3_5_moe": ("3 gated DeltaNet and 1 attention layers", False),
          "qwen3_next": ("3 gated DeltaNet and 1 attention layers", False)}
MARGIN = 1e-3
NUM_TOKENS = 12
LOGPROB_TOLERANCE = 2e-4
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--block-size": "16", "--max-num-seqs": "8",
        "--threads": "2"}
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--max-num-batched-tokens": "7", "--block-size": "1"}, {"--max-num-batched-tokens": "1"},
              {"--block-size": "4"}, {"--threads": "1"}, {"--threads": "3"}, {"--max-num-seqs": "2"},
              {"--mode": "static", "--max-num-seqs": "3"},
              {"--kv-cache-blocks": "9", "--block-size": "8", "--max-num-batched-tokens": "16"}]

c = Checks()
work = tmpdir()
rng = random.Random(17)
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60, 5, 1)]
prompts.append(prompts[3][:40] + [rng.randrange(3, 256) for _ in range(12)])  # a shared prefix
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0,
                            "ignore_eos": True, "logprobs": 1} for i, p in enumerate(prompts)])


def cbatch(model, options=None, path=prompts_path, extra=()):
    """(results by id, trace steps, summary) of a run."""
    out, trace, summary = (os.path.join(work, n) for n in ("out.jsonl", "trace.jsonl", "summary.json"))
    flags = [x for k, v in dict(BASE, **(options or {})).items() for x in ([k] if v is None else [k, v])]
    run(["run", path, "-o", out, "--trace", trace, "--summary", summary, "--model", model, "--device", "cpu",
         "--quiet"] + flags + list(extra))
    with open(summary) as f:
        return {r["id"]: r for r in read_jsonl(out)}, read_jsonl(trace), json.load(f)


def tokens(results):
    return [results[i]["output_token_ids"] for i in sorted(results)]


def reference_run(m):
    """Per prompt: (greedy ids, top-2 margins, log-softmax of each chosen id)."""
    return reference.greedy_logprobs(m, prompts, NUM_TOKENS)


def check_against_reference(label, results, expected):
    compared = 0
    for i, (ids, margins, logprobs) in enumerate(expected):
        want = ids[:reference.agreed_prefix(ids, margins, MARGIN)]
        got = results[i]["output_token_ids"]
        compared += len(want)
        c.check(got[:len(want)] == want, f"{label} prompt {i}: got {got[:len(want)]}, reference {want}")
        got_lp = [e["logprob"] for e in results[i]["logprobs"]][:len(want)]
        worst = max((abs(a - b) for a, b in zip(got_lp, logprobs)), default=0.0)
        c.check(worst < LOGPROB_TOLERANCE, f"{label} prompt {i}: a logprob is {worst:.2e} from the reference's")
    c.check(compared >= 0.8 * len(prompts) * NUM_TOKENS, f"{label}: only {compared} decisive reference tokens")


def check_model(name, layers, every_case):
    hf_dir, gguf_path = tiny.write_model(work, name)
    expected_hf = reference_run(reference.load_hf(hf_dir))
    expected_gguf = reference_run(reference.load_gguf(gguf_path))
    base_hf, steps, summary = cbatch(hf_dir)
    check_against_reference(f"{name} hf", base_hf, expected_hf)
    c.check(summary.get("prefix_caching") == "on (state snapshots)",
            f"{name} summary: prefix caching {summary.get('prefix_caching')}")
    c.check(summary.get("state_slots_total") == 8 and 0 < summary.get("peak_state_slots", 0) <= 8,
            f"{name} summary: state slots {summary.get('peak_state_slots')}/{summary.get('state_slots_total')}")
    c.check(all(0 <= s["state_slots_used"] <= s["state_slots_total"] for s in steps), f"{name} trace: state slots")
    c.check(steps[-1]["state_bytes"] == steps[-1]["state_slots_used"] * summary["state_slot_bytes"],
            f"{name} trace: state bytes")
    base_gguf, _, _ = cbatch(gguf_path)
    check_against_reference(f"{name} gguf", base_gguf, expected_gguf)
    c.check(tokens(base_gguf) == tokens(base_hf), f"{name}: the GGUF gives other tokens than the directory")
    for model, label in ((hf_dir, "hf"), (gguf_path, "gguf")):
        text = run(["inspect", "--model", model]).stdout
        c.check(f"architecture: {name.replace('_', '')}\n" in text and layers in text and
                "partial rotary (8 of 32 dims)" in text and "attention output gate" in text,
                f"{name} {label} inspect:\n{text}")
    if tiny.MODELS[name].get("layout") == "multimodal":
        c.check("vision tower" in run(["inspect", "--model", hf_dir]).stdout, f"{name}: no note of the vision tower")
    for options in INVARIANCE if every_case else INVARIANCE[::3]:  # bit for bit: tokens and logprobs
        results, steps, _ = cbatch(hf_dir, options)
        c.check([results[i]["logprobs"] for i in sorted(results)] == [base_hf[i]["logprobs"] for i in sorted(base_hf)],
                f"{name}: outputs change with {options}")
        if "--kv-cache-blocks" in options:
            c.check(sum(s["preempted"] for s in steps) > 0, f"{name} {options}: no preemption (the test needs some)")
    check_forks(name, hf_dir, base_hf, every_case)


def check_forks(name, hf_dir, base_hf, every_case):
    """n > 1: a fork copies its parent's state."""
    forks = os.path.join(work, "n.jsonl")
    greedy = {"prompt_token_ids": prompts[1], "max_tokens": 10, "temperature": 0, "ignore_eos": True}
    sampled = dict(greedy, temperature=0.9)
    write_jsonl(forks, [dict(greedy, id="g", n=3), dict(sampled, id="s", n=3, seed=5)])
    cases = ({}, {"--mode": "static"}, {"--kv-cache-blocks": "12", "--block-size": "8", "--max-num-batched-tokens": "16"})
    for options in cases if every_case else cases[:1]:
        results, _, _ = cbatch(hf_dir, options, forks)
        outs = [o["output_token_ids"] for o in results["g"]["outputs"]]
        c.check(all(o == base_hf[1]["output_token_ids"][:10] for o in outs), f"{name} {options}: greedy samples {outs}")
        for i, got in enumerate(o["output_token_ids"] for o in results["s"]["outputs"]):
            alone_path = os.path.join(work, "alone.jsonl")
            write_jsonl(alone_path, [dict(sampled, id="s", seed=5 + i)])
            alone, _, _ = cbatch(hf_dir, options, alone_path)
            c.check(got == alone["s"]["output_token_ids"], f"{name} {options}: sample {i} differs from the request alone")


for model_name, (model_layers, every) in MODELS.items():
    check_model(model_name, model_layers, every)
c.check("multi-token-prediction" in run(["inspect", "--model", os.path.join(work, NAME + ".gguf")]).stdout,
        "the GGUF's MTP block is not noted as skipped")
c.check("multi-token-prediction" in run(["inspect", "--model", os.path.join(work, NAME)]).stdout,
        "the directory's MTP layer is not noted as skipped")


# ------------------------------------------------------------------------------------------------ bad files
def refused(label, model, *needles):
    out = os.path.join(work, "refused.jsonl")
    if os.path.exists(out):
        os.remove(out)
    proc = run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet"], check=False)
    ran = os.path.exists(out) and os.path.getsize(out) > 0
    c.check(proc.returncode == 1 and not ran and all(n in proc.stderr for n in needles),
            f"{label}: exit {proc.returncode}, output written {ran}, stderr without {needles}:\n{proc.stderr[-500:]}")


def bad_hf(label, edit_config=None, drop=None, *needles):
    directory = os.path.join(work, "bad-" + label.replace(" ", "-"))
    weights = tiny.random_weights(NAME)
    if drop:
        del weights[drop]
    tiny.write_hf(directory, NAME, weights)
    if edit_config:
        path = os.path.join(directory, "config.json")
        with open(path) as f:
            config = json.load(f)
        edit_config(config["text_config"])
        with open(path, "w") as f:
            json.dump(config, f)
    refused("hf " + label, directory, *needles)


def bad_gguf(label, metadata=None, drop=None, *needles):
    """A GGUF whose writer's add_<key> calls of `metadata` write other values, or without a weight."""
    path = os.path.join(work, "bad-" + label.replace(" ", "-") + ".gguf")
    weights = tiny.random_weights(NAME)
    if drop:
        del weights[drop]
    original = tiny.METADATA[NAME]

    def patched(w, config, arch, n_mtp):
        for method, value in (metadata or {}).items():
            setattr(w, method, (lambda add, v: lambda *_: add(v))(getattr(w, method), value))
        original(w, config, arch, n_mtp)

    tiny.METADATA[NAME] = patched
    try:
        tiny.write_gguf(path, NAME, weights)
    finally:
        tiny.METADATA[NAME] = original
    refused("gguf " + label, path, *needles)


LAYER0 = "model.language_model.layers.0.linear_attn."
bad_hf("no conv", None, LAYER0 + "conv1d.weight", "model.language_model.layers.0.linear_attn.conv1d.weight", "missing")
bad_hf("no decay", None, LAYER0 + "A_log", "model.language_model.layers.0.linear_attn.A_log", "missing")
bad_hf("heads", lambda t: t.update(linear_num_value_heads=3), None, "linear_num_value_heads", "not a multiple")
bad_hf("state size", lambda t: t.update(linear_key_head_dim=8), None, "in_proj_qkv.weight", "shape")
bad_hf("conv kernel", lambda t: t.update(linear_conv_kernel_dim=3), None, "conv1d.weight", "shape")
bad_hf("layer type", lambda t: t.update(layer_types=["linear_attention", "mamba", "linear_attention",
                                                     "full_attention"]), None, "layer_types", "'mamba'")
bad_hf("layer count", lambda t: t.update(layer_types=["linear_attention", "full_attention"]), None, "layer_types")
bad_gguf("no conv", None, LAYER0 + "conv1d.weight", "blk.0.ssm_conv1d.weight", "missing")
bad_gguf("no decay", None, LAYER0 + "A_log", "blk.0.ssm_a", "missing")
bad_gguf("heads", {"add_ssm_time_step_rank": 3}, None, "qwen35.ssm.time_step_rank", "not a multiple")
bad_gguf("inner size", {"add_ssm_inner_size": 62}, None, "qwen35.ssm.inner_size", "not a multiple")
bad_gguf("state size", {"add_ssm_state_size": 8}, None, "blk.0.attn_qkv.weight", "shape")
bad_gguf("conv kernel", {"add_ssm_conv_kernel": 3}, None, "blk.0.ssm_conv1d.weight", "shape")
c.done()
