"""A pre-quantized mixture of experts on the CPU: the tiny seeded Qwen3-MoE (expert width 64, so that every
Linear's input is whole groups of 32) with every Linear quantized by the e2e GPTQ quantizer
(prequantized_files.py), its routed experts' included (the router and lm_head stay in float):
- symmetric 4-bit, groups of 32: every matrix, experts too, kept as Q4_0 blocks; the 8-bit path
  (--cpu-precision fast) is bit-identical across modes, token budgets, sequence caps and threads, its first
  token's logprob within the 8-bit activations' error of the exact path's, and the summary's weight_bytes
  shows the experts in Q4_0's int8 panel bytes (18 per 32 weights), not f32;
- asymmetric 4-bit, groups of 32: every matrix, experts too, kept as Q4_Z blocks (the codes and their zero
  points), 20 bytes per 32 weights in the int8 panels;
- 4-bit with act-order (g_idx a permutation's groups): the experts are expanded to f32 (their product
  takes activations quantized once for all of them), the dense matrices stay permuted blocks;
- FP8 with 32x32 scale blocks (quant_method fp8): every matrix, experts too, kept as FP8 blocks and run on
  the 8-bit path as Q8_0 panels (34 bytes per 32 weights).
All: greedy tokens under --cpu-precision exact equal those of the directory holding the exact
dequantizations (F32)."""
import json
import os
import random

from common import EXACT, Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy")
import numpy as np  # noqa: E402

import tiny_models  # noqa: E402
from prequantized_files import fp8, gptq, write_safetensors  # noqa: E402

NAME = "qwen3-moe-64"
tiny_models.MODELS[NAME] = dict(tiny_models.MODELS["qwen3-moe"],
                                config=dict(tiny_models.MODELS["qwen3-moe"]["config"], moe_intermediate_size=64))
FAST = [["--max-num-seqs", "4"], ["--max-num-seqs", "4", "--max-num-batched-tokens", "16"],
        ["--max-num-seqs", "4", "--mode", "static", "--threads", "1"],
        ["--max-num-seqs", "4", "--mode", "sequential", "--threads", "2"]]
FIRST_LOGPROB_GAP = 0.1  # measured: at most 0.03; a wrong scale or input order moves it by 0.2 to 1.4

c = Checks()
work = tmpdir()
rng = random.Random(31)
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, [{"id": i, "prompt_token_ids": [rng.randrange(3, 256) for _ in range(n)], "max_tokens": 12,
                       "temperature": 0, "ignore_eos": True, "logprobs": 5} for i, n in enumerate((9, 30, 51))])


def is_quantized(name):
    return name.endswith("_proj.weight")  # attention, dense FFN and expert projections; not mlp.gate (router)


def write_dir(directory, tensors, quantization=None):
    tiny_models.write_hf(directory, NAME, {"model.embed_tokens.weight": np.zeros((1, 1), np.float32)})
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
    if quantization:
        path = os.path.join(directory, "config.json")
        config = json.load(open(path))
        config["quantization_config"] = quantization
        json.dump(config, open(path, "w"), indent=1)


def outputs(model, extra, summary=None):
    out = os.path.join(work, "out.jsonl")
    more = ["--summary", summary] if summary else []
    run(["run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + extra + more)
    return [(r["output_token_ids"], r["logprobs"]) for r in sorted(read_jsonl(out), key=lambda r: r["id"])]


def weight_bytes(model):
    path = os.path.join(work, "summary.json")
    outputs(model, FAST[0], summary=path)
    return json.load(open(path))["weight_bytes"]


weights = tiny_models.random_weights(NAME)
quantized_params = sum(w.size for n, w in weights.items() if is_quantized(n))
NOT_CONVERTED = ["lm_head", "mlp.gate"]
PANEL_BYTES = {"sym": 18, "asym": 20, "fp8": 34}  # per 32 weights: Q4_0, Q4_Z, Q8_0 (FP8's panels)
PANEL_TYPE = {"sym": "Q4_0", "asym": "Q4_Z", "fp8": "Q8_0"}
for label, desc_act, sym in (("sym", False, True), ("asym", False, False), ("act-order", True, True),
                             ("fp8", False, True)):
    nrng = np.random.default_rng(3)
    tensors, exact = {}, {}
    for name, w in weights.items():
        if is_quantized(name) and label == "fp8":
            codes, scales, exact[name] = fp8(w, (32, 32))
            tensors[name], tensors[name[:-len("weight")] + "weight_scale_inv"] = ("F8_E4M3", codes), ("F32", scales)
        elif is_quantized(name):
            parts, exact[name] = gptq(w, 4, sym, desc_act, nrng)
            tensors.update({name[:-len("weight")] + k: v for k, v in parts.items()})
        else:
            tensors[name], exact[name] = ("F32", w), w
    qdir, ddir = os.path.join(work, label), os.path.join(work, label + "-dequantized")
    write_dir(qdir, tensors, dict(quant_method="fp8", fmt="e4m3", weight_block_size=[32, 32],
                                  modules_to_not_convert=NOT_CONVERTED) if label == "fp8" else
              dict(quant_method="gptq", bits=4, group_size=32, sym=sym, desc_act=desc_act, checkpoint_format="gptq",
                   modules_to_not_convert=NOT_CONVERTED))
    write_dir(ddir, {k: ("F32", v) for k, v in exact.items()})
    got, want = outputs(qdir, EXACT), outputs(ddir, EXACT)
    c.check([t for t, _ in got] == [t for t, _ in want], f"{label}: exact tokens differ from the dequantized model's")
    runs = [outputs(qdir, extra) for extra in FAST]
    for extra, r in zip(FAST[1:], runs[1:]):
        c.check(r == runs[0], f"{label} fast {' '.join(extra)}: outputs differ from {' '.join(FAST[0])}")
    exact_run = outputs(qdir, EXACT + FAST[0])
    # The first token's top 5 (same context on both paths; a random model's flat distribution may swap near-
    # ties): every token in both within the 8-bit error, and each path's pick in the other's top 5.
    gap, picked = 0.0, True
    for f, e in zip(runs[0], exact_run):
        top_f = {t["token_id"]: t["logprob"] for t in f[1][0]["top"]}
        top_e = {t["token_id"]: t["logprob"] for t in e[1][0]["top"]}
        gap = max([gap] + [abs(top_f[t] - top_e[t]) for t in top_f.keys() & top_e.keys()])
        picked = picked and f[0][0] in top_e and e[0][0] in top_f
    print(f"{label}: fast vs exact first-token top-5 logprobs, largest gap {gap:.4f}")
    c.check(picked and gap < FIRST_LOGPROB_GAP, f"{label}: fast first-token logprobs are not the exact path's "
            f"(gap {gap}, picks in each other's top 5: {picked})")
    c.check(runs[0] != exact_run, f"{label}: fast outputs equal exact ones (the 8-bit path did not run)")
    saved = weight_bytes(ddir) - weight_bytes(qdir)  # f32 against the kept form
    expert_params = sum(w.size for n, w in weights.items() if ".experts." in n)
    if not desc_act:
        want_saved = quantized_params * (4 - PANEL_BYTES[label] / 32)
        c.check(abs(saved - want_saved) < 0.01 * want_saved,
                f"{label}: kept form saves {saved} bytes against f32, expected {want_saved:.0f} (all "
                f"{PANEL_TYPE[label]})")
    else:  # experts f32, the rest Q4_0 panels plus a 4-byte input order per input
        dense = quantized_params - expert_params
        c.check(saved < dense * (4 - 18 / 32) and saved > 0.9 * dense * (4 - 18 / 32),
                f"{label}: kept form saves {saved} bytes against f32, expected about {dense * (4 - 18 / 32):.0f} "
                "(experts f32)")
c.done()
