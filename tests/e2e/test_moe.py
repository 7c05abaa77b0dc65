"""Mixtures of experts (Qwen3-MoE, Qwen2-MoE with its gated shared expert, Mixtral, OLMoE) on seeded
random-weight tiny models (tiny_models.MOE_MODELS), each as a Hugging Face directory and as a GGUF with the
same weights:
- the float64 reference (family_reference.py) checks itself, without cbatch: the GGUF and the directory
  give the same logits; a sparse layer whose experts all equal one expert (top-k renormalised, no shared
  expert) gives the logits of a dense layer of that expert; routing is not degenerate on the test prompts
  (every sparse layer picks at least MIN_EXPERT_SETS distinct expert sets and uses most experts); every
  chosen k-th router logit beats the (k+1)-th by more than GAP_MARGIN on the whole greedy path (a near-tie
  there flips under any rounding; PROMPT_SEEDS are chosen so that it holds, the minimum is printed); and
  dropping any feature of a model (the routing rule, the shared expert, q/k norms, biases, RoPE base)
  changes its greedy tokens, so cbatch missing it fails below;
- cbatch's greedy tokens (CPU) of the directory and of the GGUF equal the reference, up to each request's
  first step whose top-2 logit margin is at most MARGIN, and so equal each other;
- per model, the outputs are bit-identical across --mode continuous/static/sequential, token budgets
  (chunked prefill) and sequence caps;
- a GGUF or directory with a missing expert tensor, experts per token above the number of experts, or an
  expert tensor of the wrong shape: exit 1, stderr names the tensor or key."""
import copy
import json
import os
import random
import time

from common import EXACT, Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

import family_reference as reference  # noqa: E402
import tiny_models  # noqa: E402

MARGIN = 1e-3  # top-2 logit margin below which a reference token is not compared
GAP_MARGIN = 1e-3  # the least k-th minus (k+1)-th router logit allowed on the test prompts
MIN_EXPERT_SETS = 4
NUM_TOKENS = 12
PROMPT_LENGTHS = (12, 21, 30, 40)
# Least router gaps on these prompts (float64, whole greedy path): qwen3-moe 0.0058, qwen2-moe 0.0214,
# mixtral 0.0107, olmoe 0.0061; every reference token has a top-2 margin above MARGIN.
PROMPT_SEEDS = {"qwen3-moe": 2, "qwen2-moe": 1, "mixtral": 1, "olmoe": 3}
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--max-num-seqs": "8"}
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--max-num-batched-tokens": "7", "--block-size": "4"}, {"--max-num-seqs": "1"},
              {"--max-num-seqs": "3", "--max-num-batched-tokens": "32"}]

c = Checks()
work = tmpdir()


def make_prompts(seed):
    rng = random.Random(seed)
    return [[rng.randrange(3, 256) for _ in range(n)] for n in PROMPT_LENGTHS]


def prefill_logits(m, prompt):
    p = np.array(prompt)
    hidden = reference.forward(m, p, np.zeros(len(p), int), np.arange(len(p), dtype=np.float64),
                               [[None] * m.n_layers], np.arange(len(p)))
    return reference.logits(m, hidden)


def decisive(results):
    return [ids[:reference.agreed_prefix(ids, margins, MARGIN)] for ids, margins in results]


def check_formats_agree(name, hf_model, gguf_model, prompts):
    a, b = prefill_logits(hf_model, prompts[-1]), prefill_logits(gguf_model, prompts[-1])
    diff = float(np.abs(a - b).max())
    c.check(diff < 1e-9, f"{name}: the reference's logits of the GGUF and the directory differ by {diff:.3g}")


def check_equal_experts(name, m, prompt):
    """All experts of every sparse layer set to expert 0, renormalised, no shared expert, equals the dense
    model whose FFN is expert 0."""
    moe_model, dense = m.without("shared_expert") if "shared_expert" in m.features() else copy.copy(m), copy.copy(m)
    moe_model.moe = dict(m.moe, renorm=True)
    moe_model.layers = [dict(l) for l in moe_model.layers]
    dense.layers = [dict(l) for l in m.layers]
    for lm, ld in zip(moe_model.layers, dense.layers):
        if lm["router"] is None:
            continue
        for key in ("exp_gate", "exp_up", "exp_down"):
            lm[key] = np.broadcast_to(lm[key][:1], lm[key].shape)
        ld["gate"], ld["up"], ld["down"] = lm["exp_gate"][0], lm["exp_up"][0], lm["exp_down"][0]
        ld["router"] = ld["sh_router"] = None
    diff = float(np.abs(prefill_logits(moe_model, prompt) - prefill_logits(dense, prompt)).max())
    c.check(diff < 1e-9, f"{name}: a layer of equal experts differs from the dense layer by {diff:.3g}")


def check_routing(name, m, prompts):
    """Greedy reference results of m, checking its routing on the way (see the file's header)."""
    m.routing_log = []
    results = reference.greedy(m, prompts, NUM_TOKENS)
    log, m.routing_log = m.routing_log, None
    min_gap = min(float(gaps.min()) for _, _, gaps in log)
    c.check(min_gap > GAP_MARGIN, f"{name}: a router gap of {min_gap:.2e} between the k-th and (k+1)-th expert "
                                  f"(at most {GAP_MARGIN}): pick another PROMPT_SEEDS entry")
    for layer in sorted({i for i, _, _ in log}):
        chosen = np.concatenate([top for i, top, _ in log if i == layer])
        sets, used = {tuple(sorted(row)) for row in chosen}, len(np.unique(chosen))
        c.check(len(sets) >= MIN_EXPERT_SETS and used >= 0.75 * m.moe["n_experts"],
                f"{name} layer {layer}: degenerate routing, {len(sets)} expert sets, {used} of "
                f"{m.moe['n_experts']} experts used")
    print(f"{name}: {len(log)} routed layer passes, least router gap {min_gap:.4f}")
    return results


def check_sensitive(name, m, prompts, expected):
    want = decisive(expected)
    for feature in m.features():
        results = reference.greedy(m.without(feature), prompts, NUM_TOKENS)
        ablated = [ids[:len(w)] for (ids, _), w in zip(results, want)]
        c.check(ablated != want, f"{name}: the reference without {feature} gives the same tokens (a weak model)")


def outputs(model, prompts_path, options=None):
    """Greedy ids per prompt, computed exactly (MXFP4 experts would take the 8-bit fast path otherwise)."""
    out = os.path.join(work, "out.jsonl")
    flags = [x for k, v in dict(BASE, **(options or {})).items() for x in ([k] if v is None else [k, v])]
    run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + EXACT + flags)
    return [r["output_token_ids"] for r in sorted(read_jsonl(out), key=lambda r: r["id"])]


def check_equal(label, got, expected):
    compared = 0
    for i, ((ids, margins), want) in enumerate(zip(expected, decisive(expected))):
        compared += len(want)
        step = next((s for s, t in enumerate(want) if s >= len(got[i]) or got[i][s] != t), None)
        c.check(step is None, f"{label} prompt {i}: first difference at step {step}\n  got       "
                              f"{got[i][:len(want)]}\n  reference {want}")
    c.check(compared >= 0.8 * len(expected) * NUM_TOKENS, f"{label}: only {compared} decisive reference tokens")


def expect_refusal(label, model, needle):
    proc = run(["run", os.path.join(work, "one.jsonl"), "-o", os.path.join(work, "bad.jsonl"), "--model", model,
                "--device", "cpu", "--quiet"], check=False)
    c.check(proc.returncode == 1 and needle in proc.stderr,
            f"{label}: exit {proc.returncode} (expected 1), stderr does not name {needle!r}:\n{proc.stderr[-800:]}")


def check_bad_files(name, weights):
    """A missing expert tensor, experts per token above the expert count, a wrong expert tensor shape, in
    a directory and in a GGUF (the names looked for are parts of the full tensor names)."""
    conf, family = tiny_models.config_of(name), tiny_models.MODELS[name]["family"]
    layer = next(i for i in range(conf["num_hidden_layers"]) if tiny_models.is_sparse_layer(conf, i))
    num_experts, names = tiny_models.num_experts(conf), tiny_models.moe_names(family)
    prefix, base = f"model.layers.{layer}.", os.path.join(work, f"bad-{name}")
    up = names["expert"].format(num_experts - 1, names["up"])
    down = names["expert"].format(1, names["down"])

    tiny_models.write_hf(base + "-missing", name, {k: t for k, t in weights.items() if k != prefix + up})
    expect_refusal(f"{name} hf missing {up}", base + "-missing", up)
    tiny_models.write_hf(base + "-shape", name, dict(weights, **{prefix + down: weights[prefix + down][:, :-1]}))
    expect_refusal(f"{name} hf wrong shape of {down}", base + "-shape", down)
    tiny_models.write_hf(base + "-topk", name, weights)
    config_path = os.path.join(base + "-topk", "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["num_experts_per_tok"] = num_experts + 1
    with open(config_path, "w") as f:
        json.dump(config, f)
    expect_refusal(f"{name} hf num_experts_per_tok > experts", base + "-topk", "num_experts_per_tok")

    up_exps, down_exps = f"blk.{layer}.ffn_up_exps", f"blk.{layer}.ffn_down_exps"
    tiny_models.write_gguf(base + "-missing.gguf", name, weights, edits={up_exps + ".weight": None})
    expect_refusal(f"{name} gguf missing {up_exps}", base + "-missing.gguf", up_exps)
    stacked = np.stack([weights[prefix + names["expert"].format(e, names["down"])] for e in range(num_experts)])
    tiny_models.write_gguf(base + "-shape.gguf", name, weights, edits={down_exps + ".weight": stacked[:, :, :-1]})
    expect_refusal(f"{name} gguf wrong shape of {down_exps}", base + "-shape.gguf", down_exps)
    tiny_models.write_gguf(base + "-topk.gguf", name, weights, config=dict(conf, num_experts_per_tok=num_experts + 1))
    expect_refusal(f"{name} gguf expert_used_count > expert_count", base + "-topk.gguf", "expert_used_count")


def prepare(name):
    """Writes model `name` and its prompts, runs the reference's self-checks; returns what cbatch is checked on."""
    prompts = make_prompts(PROMPT_SEEDS[name])
    rows = [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
            for i, p in enumerate(prompts)]
    prompts_path = os.path.join(work, f"{name}-prompts.jsonl")
    write_jsonl(prompts_path, rows)
    weights = tiny_models.random_weights(name)
    hf_dir, gguf_path = os.path.join(work, name), os.path.join(work, name + ".gguf")
    tiny_models.write_hf(hf_dir, name, weights)
    tiny_models.write_gguf(gguf_path, name, weights)
    model, gguf_model = reference.load_hf(hf_dir), reference.load_gguf(gguf_path)
    check_formats_agree(name, model, gguf_model, prompts)
    check_equal_experts(name, model, prompts[-1])
    expected = check_routing(name, model, prompts)
    check_sensitive(name, model, prompts, expected)
    c.check(decisive(reference.greedy(gguf_model, prompts, NUM_TOKENS)) == decisive(expected),
            f"{name}: the GGUF's reference tokens differ from the directory's")
    return dict(name=name, weights=weights, hf_dir=hf_dir, gguf_path=gguf_path, prompts_path=prompts_path,
                expected=expected)


def check_trace(name, hf_dir, prompts_path):
    """One sequence at a time: a decode step's one row picks exactly k experts per sparse layer; a prefill's
    rows (routing is non-degenerate) pick more, never more than every expert."""
    cfg = tiny_models.config_of(name)
    k, num_sparse = cfg["num_experts_per_tok"], sum(tiny_models.is_sparse_layer(cfg, i)
                                                    for i in range(cfg["num_hidden_layers"]))
    trace = os.path.join(work, "trace.jsonl")
    outputs(hf_dir, prompts_path, {"--mode": "sequential", "--trace": trace})
    steps = read_jsonl(trace)
    for s in steps:
        got = s.get("experts_touched")
        if s["prefill_tokens"] == 0 and s["decode_tokens"] == 1:
            c.check(got == k * num_sparse, f"{name}: a one-row decode step touched {got} experts, not {k * num_sparse}")
        else:
            c.check(got is not None and k * num_sparse < got <= tiny_models.num_experts(cfg) * num_sparse,
                    f"{name}: step {s['step']} ({s['prefill_tokens']} prefill tokens) touched {got} experts")


def check_cbatch(name, weights, hf_dir, gguf_path, prompts_path, expected):
    hf_out, gguf_out = outputs(hf_dir, prompts_path), outputs(gguf_path, prompts_path)
    check_equal(f"{name} hf", hf_out, expected)
    check_equal(f"{name} gguf", gguf_out, expected)
    lengths = [len(ids) for ids in decisive(expected)]
    c.check([o[:n] for o, n in zip(hf_out, lengths)] == [o[:n] for o, n in zip(gguf_out, lengths)],
            f"{name}: the directory's and the GGUF's outputs differ\n  hf   {hf_out}\n  gguf {gguf_out}")
    for options in INVARIANCE:
        c.check(outputs(hf_dir, prompts_path, options) == hf_out, f"{name}: outputs change with {options}")
    if tiny_models.MODELS[name]["family"] == "mixtral":  # older Mixtral files: one tensor per expert
        legacy = gguf_path.replace(".gguf", "-per-expert.gguf")
        tiny_models.write_gguf(legacy, name, weights, legacy_experts=True)
        c.check(outputs(legacy, prompts_path) == gguf_out, f"{name}: the per-expert GGUF's outputs differ")
        layer = next(i for i in range(tiny_models.config_of(name)["num_hidden_layers"])
                     if tiny_models.is_sparse_layer(tiny_models.config_of(name), i))
        missing = f"blk.{layer}.ffn_up.1.weight"
        tiny_models.write_gguf(legacy + "-missing.gguf", name, weights, legacy_experts=True, edits={missing: None})
        expect_refusal(f"{name} per-expert gguf missing {missing}", legacy + "-missing.gguf", missing)
    check_trace(name, hf_dir, prompts_path)
    check_bad_files(name, weights)


write_jsonl(os.path.join(work, "one.jsonl"), [{"id": 0, "prompt_token_ids": [5, 6, 7], "max_tokens": 2}])
if __name__ == "__main__":  # test_gpt_oss.py imports the checks above
    start = time.time()
    cases = [prepare(name) for name in tiny_models.MOE_MODELS]  # the reference first: cheap, and needs no cbatch
    for case in cases:
        check_cbatch(**case)
    print(f"{len(cases)} models in {time.time() - start:.1f} s")
    c.done()
