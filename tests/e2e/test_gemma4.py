"""Gemma 4's text models on the CPU backend, on the seeded tiny models of tiny_gemma4_models.py written as a Hugging
Face directory (the multimodal config as the Hub ships it, towers to skip, the shared layers' unused k/v
projections still in the file) and as a GGUF the way llama.cpp's converter writes it:
- the float64 reference (gemma4_reference.py, checked once against transformers) depends on each feature: without
  per-layer inputs, K/V sharing (the shared layers reading the first layer of their kind), k_eq_v (the values
  taken after the k norm and RoPE), the V norm, proportional RoPE, the layer scalars, the local RoPE base, its
  greedy tokens change; without the final softcap (monotone: the tokens stay) its logprobs change;
- cbatch's greedy tokens of each file equal the reference's of that file, up to each request's first step with a
  top-2 margin of at most 1e-3, the chosen tokens' logprobs within 2e-4; directory and GGUF give the same tokens;
  inspect names the architecture, the global layers, the sharing, the per-layer inputs and the skipped towers;
- outputs are bit-identical across modes, token budgets (down to 1 token a step), block sizes, thread counts,
  sequence caps and a KV cache small enough to preempt (the trace shows preemptions); n > 1 forks equal the
  request alone (that the shared layers hold no cache is tests/engine/test_layer_kinds.cpp's);
- the same for the MoE model (26B-A4B's layout: experts beside the dense MLP, the router's own input and
  scales; the experts stacked in the directory, fused gate|up in the GGUF), on fewer invariance cases;
- bad files exit 1 before anything runs, naming the key or tensor: num_kv_shared_layers not below the layer count,
  a per-layer table of the wrong size, a sliding window of 0 (config.json and GGUF alike), a per-layer vocabulary
  other than the model's."""
import json
import os
import random

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

import gemma4_reference as reference  # noqa: E402
import tiny_gemma4_models as tiny  # noqa: E402

MARGIN = 1e-3
NUM_TOKENS = 12
LOGPROB_TOLERANCE = 2e-4
BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--block-size": "16", "--max-num-seqs": "8",
        "--threads": "2"}
INVARIANCE = [{"--mode": "static"}, {"--mode": "sequential"}, {"--max-num-batched-tokens": "16"},
              {"--max-num-batched-tokens": "7", "--block-size": "1"}, {"--max-num-batched-tokens": "1"},
              {"--block-size": "4"}, {"--threads": "1"}, {"--threads": "3"}, {"--max-num-seqs": "2"},
              {"--mode": "static", "--max-num-seqs": "3"},
              {"--kv-cache-blocks": "21", "--block-size": "8", "--max-num-batched-tokens": "16"}]

c = Checks()
work = tmpdir()
rng = random.Random(23)
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60, 5, 1)]
prompts.append(prompts[3][:40] + [rng.randrange(3, 256) for _ in range(12)])  # a shared prefix
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0,
                            "ignore_eos": True, "logprobs": 1} for i, p in enumerate(prompts)])


def cbatch(model, options=None, path=prompts_path):
    """(results by id, trace steps, summary) of a run."""
    out, trace, summary = (os.path.join(work, n) for n in ("out.jsonl", "trace.jsonl", "summary.json"))
    flags = [x for k, v in dict(BASE, **(options or {})).items() for x in ([k] if v is None else [k, v])]
    run(["run", path, "-o", out, "--trace", trace, "--summary", summary, "--model", model, "--device", "cpu",
         "--quiet"] + flags)
    with open(summary) as f:
        return {r["id"]: r for r in read_jsonl(out)}, read_jsonl(trace), json.load(f)


def tokens(results):
    return [results[i]["output_token_ids"] for i in sorted(results)]


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
    c.check(compared >= 0.7 * len(prompts) * NUM_TOKENS, f"{label}: only {compared} decisive reference tokens")


def check_sensitive(name, m):
    """Each feature the model has changes the reference's greedy tokens (the softcap: its logprobs)."""
    few = prompts[:3]
    base = reference.greedy(m, few, 8)
    for feature in m.features():
        other = reference.greedy(m.without(feature), few, 8)
        if feature == "final_softcap":
            moved = max(abs(a - b) for (_, _, la), (_, _, lb) in zip(base, other) for a, b in zip(la, lb))
            c.check(moved > 1e-3, f"{name}: the final softcap moves no logprob ({moved:.1e})")
        else:
            c.check([ids for ids, _, _ in other] != [ids for ids, _, _ in base],
                    f"{name}: the reference's tokens do not depend on {feature}")


def check_model(name, inspect_needles, every_case):
    hf_dir, gguf_path = tiny.write_model(work, name)
    m_hf = reference.load_hf(hf_dir)
    check_sensitive(name, m_hf)
    expected_hf = reference.greedy(m_hf, prompts, NUM_TOKENS)
    expected_gguf = reference.greedy(reference.load_gguf(gguf_path), prompts, NUM_TOKENS)
    base_hf, steps, summary = cbatch(hf_dir)
    check_against_reference(f"{name} hf", base_hf, expected_hf)
    base_gguf, _, _ = cbatch(gguf_path)
    check_against_reference(f"{name} gguf", base_gguf, expected_gguf)
    c.check(tokens(base_gguf) == tokens(base_hf), f"{name}: the GGUF gives other tokens than the directory")
    for model, label in ((hf_dir, "hf"), (gguf_path, "gguf")):
        text = run(["inspect", "--model", model]).stdout
        c.check("architecture: gemma4\n" in text and all(n in text for n in inspect_needles), f"{name} {label} inspect:\n{text}")
    text = run(["inspect", "--model", hf_dir]).stdout
    c.check("vision tower" in text and "audio tower" in text, f"{name}: the towers are not noted as skipped:\n{text}")
    for options in INVARIANCE if every_case else INVARIANCE[::3]:  # bit for bit: tokens and logprobs
        results, steps, _ = cbatch(hf_dir, options)
        c.check([results[i]["logprobs"] for i in sorted(results)] == [base_hf[i]["logprobs"] for i in sorted(base_hf)],
                f"{name}: outputs change with {options}")
        if "--kv-cache-blocks" in options:
            c.check(sum(s["preempted"] for s in steps) > 0, f"{name} {options}: no preemption (the test needs some)")
    check_forks(name, hf_dir, base_hf, every_case)


def check_forks(name, hf_dir, base_hf, every_case):
    forks = os.path.join(work, "n.jsonl")
    greedy = {"prompt_token_ids": prompts[1], "max_tokens": 10, "temperature": 0, "ignore_eos": True}
    sampled = dict(greedy, temperature=0.9)
    write_jsonl(forks, [dict(greedy, id="g", n=3), dict(sampled, id="s", n=3, seed=5)])
    cases = ({}, {"--mode": "static"}, {"--kv-cache-blocks": "48", "--block-size": "8", "--max-num-batched-tokens": "16"})
    for options in cases if every_case else cases[:1]:
        results, _, _ = cbatch(hf_dir, options, forks)
        outs = [o["output_token_ids"] for o in results["g"]["outputs"]]
        c.check(all(o == base_hf[1]["output_token_ids"][:10] for o in outs), f"{name} {options}: greedy samples {outs}")
        for i, got in enumerate(o["output_token_ids"] for o in results["s"]["outputs"]):
            alone_path = os.path.join(work, "alone.jsonl")
            write_jsonl(alone_path, [dict(sampled, id="s", seed=5 + i)])
            alone, _, _ = cbatch(hf_dir, options, alone_path)
            c.check(got == alone["s"]["output_token_ids"], f"{name} {options}: sample {i} differs from the request alone")


DENSE = ("global layers: head dim 32, 1 K/V heads, proportional RoPE", "values are the keys",
         "K/V shared: 2 of 6 layers", "double wide", "per-layer inputs of 8", "final softcap 5")
check_model("dense", DENSE, True)
MOE = ("mixture of experts: 8 experts, top-2 renormalised", "experts beside the dense MLP", "sparse FFN on 4 of 4 layers")
check_model("moe", MOE, False)


# ------------------------------------------------------------------------------------------------ bad files
def refused(label, model, *needles):
    out = os.path.join(work, "refused.jsonl")
    if os.path.exists(out):
        os.remove(out)
    proc = run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet"], check=False)
    ran = os.path.exists(out) and os.path.getsize(out) > 0
    c.check(proc.returncode == 1 and not ran and all(n in proc.stderr for n in needles),
            f"{label}: exit {proc.returncode}, output written {ran}, stderr without {needles}:\n{proc.stderr[-500:]}")


def bad_hf(label, edit=None, weights_edit=None, *needles):
    directory = os.path.join(work, "bad-" + label.replace(" ", "-"))
    weights = tiny.random_weights("dense")
    if weights_edit:
        weights_edit(weights)
    tiny.write_hf(directory, "dense", weights)
    if edit:
        path = os.path.join(directory, "config.json")
        with open(path) as f:
            config = json.load(f)
        edit(config["text_config"])
        with open(path, "w") as f:
            json.dump(config, f)
    refused("hf " + label, directory, *needles)


def bad_gguf(label, metadata=None, weights_edit=None, *needles):
    """A GGUF whose writer's add_<key> calls write other values, or with edited weights."""
    path = os.path.join(work, "bad-" + label.replace(" ", "-") + ".gguf")
    weights = tiny.random_weights("dense")
    if weights_edit:
        weights_edit(weights)

    def edit(w):
        for method, value in (metadata or {}).items():
            setattr(w, method, (lambda add, v: lambda *_: add(v))(getattr(w, method), value))

    # the edits replace the writer's methods before write_metadata calls them
    original = tiny.write_metadata
    tiny.write_metadata = lambda w, cfg: (edit(w), original(w, cfg))
    try:
        tiny.write_gguf(path, "dense", weights)
    finally:
        tiny.write_metadata = original
    refused("gguf " + label, path, *needles)


TABLE = "model.language_model.embed_tokens_per_layer.weight"


def small_table(w):
    w[TABLE] = w[TABLE][:, :40]


bad_hf("shared count", lambda t: t.update(num_kv_shared_layers=6), None, "num_kv_shared_layers", "below the layer count")
bad_hf("shared kind", lambda t: t.update(num_kv_shared_layers=5), None, "num_kv_shared_layers", "no earlier layer")
bad_hf("table size", None, small_table, "embed_tokens_per_layer.weight", "shape")
bad_hf("window 0", lambda t: t.update(sliding_window=0), None, "sliding_window")
bad_hf("per-layer vocab", lambda t: t.update(vocab_size_per_layer_input=200), None, "vocab_size_per_layer_input")
bad_gguf("shared count", {"add_shared_kv_layers": 7}, None, "gemma4.attention.shared_kv_layers", "below the layer count")
bad_gguf("table size", None, small_table, "per_layer_token_embd.weight", "shape")
bad_gguf("window 0", {"add_sliding_window": 0}, None, "gemma4.attention.sliding_window", "must be positive")
c.done()
