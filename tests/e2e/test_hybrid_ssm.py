"""LFM2 (short convolutions), Granite 4.0-H (Mamba-2, dense and with experts) and Nemotron-H (Mamba-2, one sublayer
per layer) on the CPU backend, on the seeded tiny models of tiny_hybrid_models.py written as Hugging Face directories
and as GGUFs the way llama.cpp's converter writes them (per-layer head_count_kv, ssm_a = -exp(A_log), ssm_d and
ssm_norm reshaped, Granite's q/k rows permuted, LFM2's token_embd_norm):
- cbatch's greedy tokens of each file equal the float64 reference's of that file (hybrid_reference.py), up to each
  request's first step with a top-2 margin of at most 1e-3, the chosen tokens' logprobs within 2e-4 of the
  reference's; the directory and the GGUF give the same tokens; inspect names the layer kinds; the summary's
  state_slot_bytes (and bench --json's) is what the config says a slot keeps (conv windows and SSM states);
- the comparison can fail: the reference without one feature (the conv window, D, dt_bias, the z gate, Granite's
  multipliers, relu^2 as relu, ...) gives other tokens than cbatch on some prompt;
- outputs are bit-identical across modes, token budgets (chunked prefill down to 1 token a step), block sizes,
  thread counts, sequence caps and a KV cache small enough to preempt (the trace shows it);
- n = 2 forks copy the recurrent state: greedy samples equal the request alone, sampled sample i equals the request
  alone with seed + i;
- bad files exit 1 before anything runs, naming the tensor or key: a missing conv or A_log tensor, head counts that
  do not divide, a conv kernel or state size that disagrees with the tensors, an unknown layer type or pattern
  character."""
import json
import os
import random

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

import hybrid_reference as reference  # noqa: E402
import tiny_hybrid_models as tiny  # noqa: E402

# Per model: inspect's layer kinds, the features whose absence must change the reference's tokens, and whether
# every invariance case runs (the others: a third of them).
MODELS = {
    "lfm2": ("short conv, attention, short conv, short conv, attention",
             ("conv_window", "conv_carry", "b_gate", "c_gate", "qk_norm"), True),
    "granite_h": ("Mamba-2, attention, Mamba-2, Mamba-2",
                  ("conv_window", "conv_carry", "d_skip", "dt_bias", "decay", "state_carry", "gated_norm",
                   "norm_groups", "embedding_multiplier", "residual_multiplier", "attention_multiplier"), True),
    "granite_h_moe": ("Mamba-2, Mamba-2, attention, Mamba-2, attention",
                      ("d_skip", "gated_norm", "shared_expert", "residual_multiplier"), False),
    "nemotron_h": ("Mamba-2, MLP, attention, MLP, Mamba-2, MLP",
                   ("conv_window", "d_skip", "dt_bias", "gated_norm", "norm_groups", "relu2"), True),
}
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


def cbatch(model, options=None, path=prompts_path):
    """(results by id, trace steps, summary) of a run."""
    out, trace, summary = (os.path.join(work, n) for n in ("out.jsonl", "trace.jsonl", "summary.json"))
    flags = [x for k, v in dict(BASE, **(options or {})).items() for x in (k, v)]
    run(["run", path, "-o", out, "--trace", trace, "--summary", summary, "--model", model, "--device", "cpu",
         "--quiet"] + flags)
    with open(summary) as f:
        return {r["id"]: r for r in read_jsonl(out)}, read_jsonl(trace), json.load(f)


def tokens(results):
    return [results[i]["output_token_ids"] for i in sorted(results)]


def reference_run(m, subset=None):
    """Per prompt: (greedy ids, top-2 margins, log-softmax of each chosen id)."""
    return reference.greedy_logprobs(m, subset or prompts, NUM_TOKENS)


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


def check_ablations(name, m, results, features):
    """Without each feature the reference's decisive tokens differ from cbatch's on some prompt."""
    for feature in features:
        ablated = m.without(feature)
        changed = False
        for i, prompt in enumerate(prompts[:4]):
            ids, margins, _ = reference_run(ablated, [prompt])[0]
            k = reference.agreed_prefix(ids, margins, MARGIN)
            if ids[:k] != results[i]["output_token_ids"][:k]:
                changed = True
                break
        c.check(changed, f"{name}: the reference without {feature} gives cbatch's tokens (the test could not fail)")


def slot_bytes(name):
    """Bytes a state slot keeps per the config: conv windows and SSM states of the recurrent layers, fp32."""
    cfg = tiny.config_of(name)
    types = tiny.layer_types(cfg)
    if cfg["model_type"] == "lfm2":
        per_layer = (cfg["conv_L_cache"] - 1) * cfg["hidden_size"]
        return 4 * per_layer * sum(t == "conv" for t in types)
    heads, head_dim, state, groups, kernel = tiny.mamba_sizes(cfg)
    per_layer = (kernel - 1) * (heads * head_dim + 2 * groups * state) + heads * head_dim * state
    return 4 * per_layer * sum(t == "linear_attention" for t in types)


def check_model(name, layers, features, every_case):
    hf_dir, gguf_path = tiny.write_model(work, name)
    model_hf = reference.load_hf(hf_dir)
    base_hf, steps, summary = cbatch(hf_dir)
    check_against_reference(f"{name} hf", base_hf, reference_run(model_hf))
    c.check(summary.get("state_slots_total") == 8 and 0 < summary.get("peak_state_slots", 0) <= 8,
            f"{name} summary: state slots {summary.get('peak_state_slots')}/{summary.get('state_slots_total')}")
    c.check(summary.get("state_slot_bytes") == slot_bytes(name),
            f"{name} summary: state_slot_bytes {summary.get('state_slot_bytes')}, the config says {slot_bytes(name)}")
    c.check(steps[-1]["state_bytes"] == steps[-1]["state_slots_used"] * summary["state_slot_bytes"],
            f"{name} trace: state bytes")
    bench_json = os.path.join(work, "bench.json")
    run(["bench", "--model", gguf_path, "--device", "cpu", "--dataset", "random", "--num-prompts", "2", "--input-len",
         "4", "--output-len", "2", "--modes", "continuous", "--quiet", "--json", bench_json])
    with open(bench_json) as f:
        bench = json.load(f)["results"][0]
    c.check(bench.get("state_slot_bytes") == slot_bytes(name) and bench.get("peak_state_slots", 0) > 0,
            f"{name} bench --json: state_slot_bytes {bench.get('state_slot_bytes')}, expected {slot_bytes(name)}")
    base_gguf, _, _ = cbatch(gguf_path)
    check_against_reference(f"{name} gguf", base_gguf, reference_run(reference.load_gguf(gguf_path)))
    c.check(tokens(base_gguf) == tokens(base_hf), f"{name}: the GGUF gives other tokens than the directory")
    for model, label in ((hf_dir, "hf"), (gguf_path, "gguf")):
        text = run(["inspect", "--model", model]).stdout
        c.check(f"layer kinds: {layers}\n" in text, f"{name} {label} inspect:\n{text}")
    check_ablations(name, model_hf, base_hf, features)
    for options in INVARIANCE if every_case else INVARIANCE[::3]:  # bit for bit: tokens and logprobs
        results, steps, _ = cbatch(hf_dir, options)
        c.check([results[i]["logprobs"] for i in sorted(results)] == [base_hf[i]["logprobs"] for i in sorted(base_hf)],
                f"{name}: outputs change with {options}")
        if "--kv-cache-blocks" in options:
            c.check(sum(s["preempted"] for s in steps) > 0, f"{name} {options}: no preemption (the test needs some)")
    check_forks(name, hf_dir, base_hf)


def check_forks(name, hf_dir, base_hf):
    """n = 2: a fork copies its parent's state (also under preemption)."""
    forks = os.path.join(work, "n.jsonl")
    greedy = {"prompt_token_ids": prompts[1], "max_tokens": 10, "temperature": 0, "ignore_eos": True}
    sampled = dict(greedy, temperature=0.9)
    write_jsonl(forks, [dict(greedy, id="g", n=2), dict(sampled, id="s", n=2, seed=5)])
    for options in ({}, {"--kv-cache-blocks": "12", "--block-size": "8", "--max-num-batched-tokens": "16"}):
        results, _, _ = cbatch(hf_dir, options, forks)
        outs = [o["output_token_ids"] for o in results["g"]["outputs"]]
        c.check(all(o == base_hf[1]["output_token_ids"][:10] for o in outs), f"{name} {options}: greedy samples {outs}")
        for i, got in enumerate(o["output_token_ids"] for o in results["s"]["outputs"]):
            alone_path = os.path.join(work, "alone.jsonl")
            write_jsonl(alone_path, [dict(sampled, id="s", seed=5 + i)])
            alone, _, _ = cbatch(hf_dir, options, alone_path)
            c.check(got == alone["s"]["output_token_ids"], f"{name} {options}: sample {i} differs from the request alone")


for model_name, (model_layers, model_features, every) in MODELS.items():
    check_model(model_name, model_layers, model_features, every)


def check_granite_rope():
    """Granite with position_embedding_type "rope" (GGUF: rope.scaling.finetuned true): the GGUF's q/k rows, permuted
    as `llama` files are, rotate as adjacent pairs; the directory's as halves; both equal the reference."""
    tiny.MODELS["granite_rope"] = dict(family="granitemoehybrid",
                                       config=dict(tiny.MODELS["granite_h"]["config"], position_embedding_type="rope"))
    original = tiny.METADATA["granitemoehybrid"]

    def with_rope(w, config, arch, n_mtp):
        w.add_rope_scaling_finetuned = lambda *_: None
        original(w, config, arch, n_mtp)
        w.add_bool(f"{arch}.rope.scaling.finetuned", True)

    tiny.METADATA["granitemoehybrid"] = with_rope
    try:
        hf_dir, gguf_path = tiny.write_model(work, "granite_rope")
    finally:
        tiny.METADATA["granitemoehybrid"] = original
    results, _, _ = cbatch(hf_dir)
    check_against_reference("granite with RoPE hf", results, reference_run(reference.load_hf(hf_dir)))
    c.check(tokens(cbatch(gguf_path)[0]) == tokens(results), "granite with RoPE: the GGUF gives other tokens")
    c.check("NoPE" not in run(["inspect", "--model", gguf_path]).stdout, "granite with RoPE: the GGUF reads as NoPE")


check_granite_rope()


# ------------------------------------------------------------------------------------------------ bad files
def refused(label, model, *needles):
    out = os.path.join(work, "refused.jsonl")
    if os.path.exists(out):
        os.remove(out)
    proc = run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet"], check=False)
    ran = os.path.exists(out) and os.path.getsize(out) > 0
    c.check(proc.returncode == 1 and not ran and all(n in proc.stderr for n in needles),
            f"{label}: exit {proc.returncode}, output written {ran}, stderr without {needles}:\n{proc.stderr[-500:]}")


def bad_hf(name, label, edit_config=None, drop=None, *needles):
    directory = os.path.join(work, f"bad-{name}-" + label.replace(" ", "-"))
    weights = tiny.random_weights(name)
    if drop:
        del weights[drop]
    tiny.write_hf(directory, name, weights)
    if edit_config:
        path = os.path.join(directory, "config.json")
        with open(path) as f:
            config = json.load(f)
        edit_config(config)
        with open(path, "w") as f:
            json.dump(config, f)
    refused(f"{name} hf {label}", directory, *needles)


def bad_gguf(name, label, metadata=None, drop=None, *needles):
    """A GGUF whose writer's add_<key> calls of `metadata` write other values, or without a weight."""
    path = os.path.join(work, f"bad-{name}-" + label.replace(" ", "-") + ".gguf")
    weights = tiny.random_weights(name)
    if drop:
        del weights[drop]
    family = tiny.MODELS[name]["family"]
    original = tiny.METADATA[family]

    def patched(w, config, arch, n_mtp):
        for method, value in (metadata or {}).items():
            setattr(w, method, (lambda add, v: lambda *_: add(v))(getattr(w, method), value))
        original(w, config, arch, n_mtp)

    tiny.METADATA[family] = patched
    try:
        tiny.write_gguf(path, name, weights)
    finally:
        tiny.METADATA[family] = original
    refused(f"{name} gguf {label}", path, *needles)


CONV, MAMBA, MIXER = "model.layers.0.conv.", "model.layers.0.mamba.", "backbone.layers.0.mixer."
bad_hf("lfm2", "no conv", None, CONV + "conv.weight", CONV + "conv.weight", "missing")
bad_hf("lfm2", "conv size", lambda t: t.update(conv_L_cache=4), None, CONV + "conv.weight", "shape")
bad_hf("lfm2", "layer type", lambda t: t.update(layer_types=["conv", "mamba", "conv", "conv", "full_attention"]), None,
       "layer_types", "'mamba'")
bad_gguf("lfm2", "no conv", None, CONV + "conv.weight", "blk.0.shortconv.conv.weight", "missing")
bad_gguf("lfm2", "conv size", {"add_shortconv_l_cache": 4}, None, "blk.0.shortconv.conv.weight", "shape")
bad_gguf("lfm2", "kv heads", {"add_head_count_kv": 2}, None, "lfm2.attention.head_count_kv", "per-layer")
bad_hf("granite_h", "no A_log", None, MAMBA + "A_log", MAMBA + "A_log", "missing")
bad_hf("granite_h", "no conv", None, MAMBA + "conv1d.weight", MAMBA + "conv1d.weight", "missing")
bad_hf("granite_h", "groups", lambda t: t.update(mamba_n_groups=3), None, "mamba_n_heads", "not a multiple")
bad_hf("granite_h", "state size", lambda t: t.update(mamba_d_state=8), None, MAMBA + "in_proj.weight", "shape")
bad_hf("granite_h", "conv kernel", lambda t: t.update(mamba_d_conv=3), None, MAMBA + "conv1d.weight", "shape")
bad_hf("granite_h", "layer type", lambda t: t.update(layer_types=["mamba", "conv", "mamba", "mamba"]), None,
       "layer_types", "'conv'")
bad_gguf("granite_h", "no A_log", None, MAMBA + "A_log", "blk.0.ssm_a", "missing")
bad_gguf("granite_h", "groups", {"add_ssm_group_count": 3}, None, "granitehybrid.ssm.time_step_rank", "not a multiple")
bad_gguf("granite_h", "state size", {"add_ssm_state_size": 8}, None, "blk.0.ssm_in.weight", "shape")
bad_gguf("granite_h", "conv kernel", {"add_ssm_conv_kernel": 3}, None, "blk.0.ssm_conv1d.weight", "shape")
bad_hf("nemotron_h", "pattern", lambda t: t.update(hybrid_override_pattern="M-*-E-"), None, "hybrid_override_pattern",
       "'E'")
bad_hf("nemotron_h", "no conv", None, MIXER + "conv1d.weight", MIXER + "conv1d.weight", "missing")
bad_hf("nemotron_h", "heads", lambda t: t.update(mamba_num_heads=7), None, "mamba_num_heads", "not a multiple")
bad_gguf("nemotron_h", "no A_log", None, MIXER + "A_log", "blk.0.ssm_a", "missing")
bad_gguf("nemotron_h", "inner size", {"add_ssm_inner_size": 100}, None, "nemotron_h.ssm.inner_size", "not a multiple")
c.done()
