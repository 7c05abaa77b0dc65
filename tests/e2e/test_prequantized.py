"""Pre-quantized Hugging Face checkpoints (GPTQ, AWQ, compressed-tensors, FP8, NVFP4) on the CPU: integer
ones kept as the blocks that hold their codes exactly (symmetric: Q4_0, Q8_0; asymmetric: Q4_Z, Q8_Z, the
codes with their zero points; act-order inputs permuted into groups), FP8 kept as its own blocks (E4M3 codes,
a scale per 32 inputs), NVFP4 as its own blocks (E2M1 codes, the scale of each 16 inputs). The tiny seeded
Llama of tiny_models.py has its Linear weights (not the embedding, the norms or lm_head, which the configs
list as not converted, except where FP8 blocks cover lm_head too) quantized here by numpy quantizers written
from the formats' definitions:
- GPTQ (v1 checkpoint_format: zeros stored minus 1): 4-bit asymmetric and symmetric with act-order (g_idx a
  random permutation's groups), 8-bit symmetric and asymmetric without, group 32; a gptq_v2 one (zeros as
  they are); qweight (in * bits / 32, out) packed along the input, qzeros (groups, out * bits / 32) along
  the output, scales (groups, out) F16;
- AWQ GEMM: qweight (in, out / 8) and qzeros with the nibbles of columns [0, 2, 4, 6, 1, 3, 5, 7], scales F16;
- compressed-tensors pack-quantized: INT4 asymmetric by groups of 32 with weight_g_idx (zero points packed
  along the output), INT8 symmetric per channel; codes packed along the input, offset by 2^(bits - 1);
- compressed-tensors nvfp4-pack-quantized: E2M1 codes two a byte (the even input in the low nibble), an
  F8_E4M3 scale per 16 inputs and a global scale stored as the divisor (w = e2m1 * fp8 / global), kept as
  NVFP4 blocks and run on the 8-bit path like the integer schemes; input_global_scale not read;
- FP8: quant_method fp8 with weight_block_size (F8_E4M3 weights, weight_scale_inv per block, partial edge
  blocks), and compressed-tensors float-quantized per channel (weight_scale (out, 1); input_scale not read).
Each is also written with every weight replaced by its exact dequantization (F32). cbatch's greedy tokens
from the quantized directory equal its tokens from the dequantized one under --cpu-precision exact (the
blocks decode to the same fp32 values), which equal the float64
reference's (family_reference.py) over its decisive steps, and differ from the unquantized model's (so a
reader that ignored scales, zeros or the nibble order would fail). `cbatch inspect` names the scheme. The
integer schemes then run the 8-bit path (--cpu-precision fast, the default): greedy tokens and logprobs
bit-identical across modes, token budgets, sequence caps and threads, logprobs not the exact path's, and the
summary's weight_bytes shows the linears kept in their block type's bytes, not f32, and `cbatch inspect` names
that type (the weight dtype); FP8 runs the 8-bit path through Q8_0 panels (its codes re-quantized), checked the
same way. Broken files exit 1 naming the tensor or the field (an FP8 NaN code too)."""
import json
import os
import random
import shutil

from common import EXACT, Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy")
import numpy as np  # noqa: E402

import family_reference as reference  # noqa: E402
import tiny_models  # noqa: E402
from prequantized_files import (E4M3, NVFP4, dequantized, fp8, gptq, int_quantize, nvfp4, pack,  # noqa: E402
                                write_safetensors)

NAME = "llama"
MARGIN = 1e-3
NUM_TOKENS = 16
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # the output column of each nibble of a word, low nibble first

c = Checks()
work = tmpdir()
rng = random.Random(23)
prompts = [[rng.randrange(3, 256) for _ in range(n)] for n in (20, 33, 47, 60)]
prompts_path = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts_path, [{"id": i, "prompt_token_ids": p, "max_tokens": NUM_TOKENS, "temperature": 0,
                            "ignore_eos": True, "logprobs": 1} for i, p in enumerate(prompts)])


# ------------------------------------------------------------------------------------------- files
def write_model(directory, tensors, quantization=None):
    """The tiny Llama's directory with `tensors` and, when given, a quantization_config."""
    tiny_models.write_hf(directory, NAME, {"model.embed_tokens.weight": np.zeros((1, 1), np.float32)})
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
    if quantization:
        path = os.path.join(directory, "config.json")
        config = json.load(open(path))
        config["quantization_config"] = quantization
        json.dump(config, open(path, "w"), indent=1)


def f32(t):
    return ("F32", np.asarray(t, dtype="<f4"))


def is_linear(name):
    return any(name.endswith(f"{lin}.weight") for lin in LINEARS)


# ------------------------------------------------------------------------------------------- quantizers
def awq(w, group=32):
    out, inp = w.shape
    groups = np.arange(inp) // group
    codes, zeros, scales = int_quantize(w, groups, 4, False)

    def awq_pack(v):  # (rows, out) -> (rows, out / 8): nibble i of word c holds column 8c + AWQ_ORDER[i]
        order = np.array([8 * c + AWQ_ORDER[i] for c in range(v.shape[1] // 8) for i in range(8)])
        return pack(v[:, order].T, 4, 0).T.copy()

    parts = {"qweight": ("I32", awq_pack(codes.T)), "qzeros": ("I32", awq_pack(zeros)),
             "scales": ("F16", scales.astype("<f2"))}
    return parts, dequantized(codes, zeros, scales, groups)


def pack_quantized(w, bits, sym, group, nrng):
    """compressed-tensors pack-quantized: codes (stored as the signed code plus 2^(bits - 1), i.e. int_quantize's
    unsigned ones) packed along the input, zeros along the output; group None: per channel (act-order when
    grouped: weight_g_idx)."""
    out, inp = w.shape
    groups = np.zeros(inp, np.int64)
    if group:
        groups[nrng.permutation(inp)] = np.arange(inp) // group
    codes, zeros, scales = int_quantize(w, groups, bits, sym)
    parts = {"weight_packed": ("I32", pack(codes, bits, 1)), "weight_scale": ("F16", scales.T.astype("<f2").copy()),
             "weight_shape": ("I32", np.array([out, inp], "<i4"))}
    if group:
        parts["weight_g_idx"] = ("I32", groups.astype("<i4"))
    if not sym:
        parts["weight_zero_point"] = ("I32", pack(zeros.T, bits, 0))
    return parts, dequantized(codes, zeros, scales, groups)


# ------------------------------------------------------------------------------------------- schemes
def quantized_model(weights, scheme, nrng):
    """(quantized tensors, dequantized float weights, quantization_config) of one scheme."""
    tensors, exact = {}, {}
    for name, w in weights.items():
        stem = name[:-len("weight")]
        if scheme["method"] == "fp8-block" and (is_linear(name) or name == "lm_head.weight"):
            codes, scales, exact[name] = fp8(w, (32, 32))
            tensors[name], tensors[stem + "weight_scale_inv"] = ("F8_E4M3", codes), f32(scales)
        elif scheme["method"] == "fp8-channel" and is_linear(name):
            codes, scales, exact[name] = fp8(w, (1, w.shape[1]), to_bf16)
            tensors[name], tensors[stem + "weight_scale"] = ("F8_E4M3", codes), ("BF16", bf16_bits(scales))
            tensors[stem + "input_scale"] = f32(np.array([0.5]))
        elif scheme["method"] == "gptq" and is_linear(name):
            parts, exact[name] = gptq(w, scheme["bits"], scheme["sym"], scheme["desc_act"], nrng, scheme.get("v2"))
            tensors.update({stem + k: v for k, v in parts.items()})
        elif scheme["method"] == "packed" and is_linear(name):
            parts, exact[name] = pack_quantized(w, scheme["bits"], scheme["sym"], scheme["group"], nrng)
            tensors.update({stem + k: v for k, v in parts.items()})
        elif scheme["method"] == "nvfp4" and is_linear(name):
            parts, exact[name] = nvfp4(w)
            tensors.update({stem + k: v for k, v in parts.items()})
        elif scheme["method"] == "awq" and is_linear(name):
            parts, exact[name] = awq(w)
            tensors.update({stem + k: v for k, v in parts.items()})
        else:
            tensors[name], exact[name] = f32(w), w
    return tensors, exact, scheme["config"]


def to_bf16(s):
    return tiny_models.to_bf16(np.array([s], np.float32))[0]


def bf16_bits(values):
    """bf16-representable float32 values as BF16's 16 bits."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype("<u2")


def packed_config(bits, sym, group):
    weights = dict(num_bits=bits, type="int", symmetric=sym, strategy="group" if group else "channel",
                   group_size=group, actorder="group" if group else None, dynamic=False)
    return dict(quant_method="compressed-tensors", format="pack-quantized", ignore=["lm_head"],
                config_groups={"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None}})


GPTQ = dict(quant_method="gptq", group_size=32, checkpoint_format="gptq", modules_to_not_convert=["lm_head"])
SCHEMES = {
    "gptq4-asym-act": dict(method="gptq", bits=4, sym=False, desc_act=True, blocks="Q4_Z",
                           config=dict(GPTQ, bits=4, sym=False, desc_act=True), inspect="gptq (gptq) 4-bit, group 32"),
    "gptq4-asym-v2": dict(method="gptq", bits=4, sym=False, desc_act=False, v2=True, blocks="Q4_Z",
                          config=dict(GPTQ, bits=4, sym=False, desc_act=False, checkpoint_format="gptq_v2"),
                          inspect="gptq (gptq_v2) 4-bit, group 32, asymmetric"),
    "gptq4-sym-act": dict(method="gptq", bits=4, sym=True, desc_act=True, blocks="Q4_0",
                          config=dict(GPTQ, bits=4, sym=True, desc_act=True), inspect="symmetric, act-order"),
    "gptq8-sym": dict(method="gptq", bits=8, sym=True, desc_act=False, blocks="Q8_0",
                      config=dict(GPTQ, bits=8, sym=True, desc_act=False), inspect="gptq (gptq) 8-bit"),
    "gptq8-asym": dict(method="gptq", bits=8, sym=False, desc_act=False, blocks="Q8_Z",
                       config=dict(GPTQ, bits=8, sym=False, desc_act=False),
                       inspect="gptq (gptq) 8-bit, group 32, asymmetric"),
    "awq": dict(method="awq", blocks="Q4_Z", config=dict(quant_method="awq", bits=4, group_size=32, zero_point=True,
                                          version="gemm", modules_to_not_convert=["lm_head"]),
                inspect="awq (gemm) 4-bit, group 32"),
    "int4-group-asym": dict(method="packed", bits=4, sym=False, group=32, blocks="Q4_Z",
                            config=packed_config(4, False, 32),
                            inspect="compressed-tensors (pack-quantized) 4-bit, group 32, asymmetric"),
    "int8-channel-sym": dict(method="packed", bits=8, sym=True, group=None, blocks="Q8_0", config=packed_config(8, True, None),
                             inspect="compressed-tensors (pack-quantized) 8-bit, per channel, symmetric"),
    "nvfp4": dict(method="nvfp4", blocks="NVFP4", config=NVFP4,
                  inspect="compressed-tensors (nvfp4-pack-quantized) 4-bit, e2m1, an e4m3 scale per 16 and a global "
                          "scale, 4.50 bits per weight"),
    "fp8-block": dict(method="fp8-block", blocks="Q8_0", dtype="fp8_e4m3", config=dict(quant_method="fp8", fmt="e4m3",
                                                                     activation_scheme="dynamic",
                                                                     weight_block_size=[32, 32]),
                      inspect="fp8 8-bit, blocks 32x32"),
    "fp8-channel": dict(method="fp8-channel", blocks="Q8_0", dtype="fp8_e4m3", config=dict(
        quant_method="compressed-tensors", format="float-quantized", ignore=["lm_head"],
        config_groups={"group_0": {"targets": ["Linear"], "weights": dict(num_bits=8, type="float", strategy="channel",
                                                                          symmetric=True, dynamic=False),
                                   "input_activations": dict(num_bits=8, type="float", strategy="tensor")}}),
        inspect="compressed-tensors (float-quantized) 8-bit, per channel"),
}


# ------------------------------------------------------------------------------------------- checks
# Bits a weight takes in int8 panels of the block type an integer scheme's codes fit (Q4_Z, Q8_Z: an fp16
# scale and zero point per 32, as Q4_1's).
PANEL_BITS = {"Q4_0": 4.5, "Q8_0": 8.5, "Q4_Z": 5.0, "Q8_Z": 9.0, "NVFP4": 6.0}
FIRST_LOGPROB_GAP = 0.05
FAST_CONFIGS = [["--max-num-seqs", "4"], ["--max-num-seqs", "4", "--max-num-batched-tokens", "16"],
                ["--max-num-seqs", "4", "--mode", "static", "--threads", "1"],
                ["--max-num-seqs", "4", "--mode", "sequential", "--threads", "2"]]
def outputs(model, extra=EXACT, logprobs=False, summary=None):
    out = os.path.join(work, "out.jsonl")
    more = ["--summary", summary] if summary else []
    run(["run", prompts_path, "-o", out, "--model", model, "--device", "cpu", "--quiet"] + extra + more)
    rows = sorted(read_jsonl(out), key=lambda r: r["id"])
    return [(r["output_token_ids"], r["logprobs"]) if logprobs else r["output_token_ids"] for r in rows]


def weight_bytes(model, extra):
    path = os.path.join(work, "summary.json")
    outputs(model, extra, summary=path)
    return json.load(open(path))["weight_bytes"]


def is_quantized(name, scheme):
    return is_linear(name) or (scheme["method"] == "fp8-block" and name == "lm_head.weight")


def check_fast(label, quantized_dir, exact_dir, scheme):
    """The 8-bit path on a scheme's blocks: batch-invariant, not the exact product, and the quantized weights
    in the panel bytes of the block type `scheme["blocks"]` (plus 4 bytes an input of each act-order matrix's
    order)."""
    blocks = scheme["blocks"]
    runs = [outputs(quantized_dir, extra, logprobs=True) for extra in FAST_CONFIGS]
    for extra, got in zip(FAST_CONFIGS[1:], runs[1:]):
        c.check(got == runs[0], f"{label} fast {' '.join(extra)}: outputs differ from {' '.join(FAST_CONFIGS[0])}")
    exact = outputs(quantized_dir, EXACT + ["--max-num-seqs", "4"], logprobs=True)
    c.check([lp for _, lp in exact] != [lp for _, lp in runs[0]], f"{label}: fast logprobs equal exact ones")
    # The first token of each prompt (same context on both paths): its top logprob within the 8-bit
    # activations' error of the exact one (a wrong scale, zero or input order moves it by far more); the
    # token itself the same but for at most one near-tie the 8-bit rounding flipped (FP8 also re-quantizes
    # its lm_head, so its logits move a little more).
    first_gap = max(abs(f[1][0]["logprob"] - e[1][0]["logprob"]) for f, e in zip(runs[0], exact))
    flipped = [(f[0][0], e[0][0]) for f, e in zip(runs[0], exact) if f[0][0] != e[0][0]]
    print(f"{label}: fast vs exact first-token logprob, largest gap {first_gap:.4f}; near-ties flipped {flipped}")
    c.check(len(flipped) <= 1 and first_gap < FIRST_LOGPROB_GAP,
            f"{label}: fast first tokens or logprobs are not the exact path's (gap {first_gap}, flipped {flipped})")
    linear = sum(w.size for n, w in weights.items() if is_quantized(n, scheme))
    inputs = sum(w.shape[1] for n, w in weights.items() if is_quantized(n, scheme))
    kept = weight_bytes(quantized_dir, FAST_CONFIGS[0])
    f32_kept = weight_bytes(exact_dir, FAST_CONFIGS[0])
    linear_bytes = kept - (f32_kept - 4 * linear)
    want = linear * PANEL_BITS[blocks] / 8
    # A matrix whose rows are not whole panels (lm_head's 300) pads them in both: less than 4 bytes a padded
    # weight more in the f32 model (panels of at most 16 rows).
    padding = sum(4 * 15 * w.shape[1] for n, w in weights.items() if is_quantized(n, scheme) and w.shape[0] % 16)
    c.check(want - padding <= linear_bytes <= want + 4 * inputs,
            f"{label}: linears take {linear_bytes} bytes, expected {want:.0f} ({blocks} panels) + input orders")


def check_reference(label, got, expected):

    compared = 0
    for i, (ids, margins) in enumerate(expected):
        want = ids[:reference.agreed_prefix(ids, margins, MARGIN)]
        compared += len(want)
        c.check(got[i][:len(want)] == want, f"{label} prompt {i}: got {got[i][:len(want)]}, reference {want}")
    c.check(compared >= 0.8 * len(prompts) * NUM_TOKENS, f"{label}: only {compared} decisive reference tokens")


def expect_failure(label, directory, needles):
    proc = run(["run", prompts_path, "-o", os.path.join(work, "bad.jsonl"), "--model", directory, "--device", "cpu",
                "--quiet"], check=False)
    c.check(proc.returncode == 1, f"{label}: exit {proc.returncode}, expected 1\n{proc.stderr[-1000:]}")
    for needle in needles:
        c.check(needle in proc.stderr, f"{label}: the message does not say {needle!r}:\n{proc.stderr[-1000:]}")


weights = {k: v for k, v in tiny_models.random_weights(NAME).items()}
original = os.path.join(work, "original")
write_model(original, {k: f32(v) for k, v in weights.items()})
original_tokens = outputs(original)
nrng = np.random.default_rng(5)
for label, scheme in SCHEMES.items():
    tensors, exact, config = quantized_model(weights, scheme, nrng)
    quantized_dir, exact_dir = os.path.join(work, label), os.path.join(work, label + "-dequantized")
    write_model(quantized_dir, tensors, config)
    write_model(exact_dir, {k: f32(v) for k, v in exact.items()})
    got, want = outputs(quantized_dir), outputs(exact_dir)
    c.check(got == want, f"{label}: tokens differ from the dequantized model's\n  got  {got}\n  want {want}")
    c.check(got != original_tokens, f"{label}: tokens equal the unquantized model's (a weak test)")
    check_reference(label, want, reference.greedy(reference.load_hf(exact_dir), prompts, NUM_TOKENS))
    text = run(["inspect", "--model", quantized_dir]).stdout
    line = next((x for x in text.splitlines() if x.startswith("quantization: ")), "")
    c.check(scheme["inspect"] in line, f"{label}: inspect does not say {scheme['inspect']!r}:\n{text}")
    if "blocks" in scheme:
        dtype = next((x for x in text.splitlines() if x.startswith("weight dtype: ")), "")
        want_dtype = scheme.get("dtype", scheme["blocks"].lower())
        c.check(dtype == "weight dtype: " + want_dtype, f"{label}: inspect says {dtype!r}, expected {want_dtype}")
        check_fast(label, quantized_dir, exact_dir, scheme)


# ------------------------------------------------------------------------------------------- broken files
def broken(label, edit_tensors=None, edit_config=None, scheme="gptq4-asym-act"):
    """A copy of a scheme's directory (GPTQ 4-bit asymmetric) with its tensors or config edited."""
    src, dst = os.path.join(work, scheme), os.path.join(work, "bad-" + label)
    shutil.copytree(src, dst)
    tensors, _, config = quantized_model(weights, SCHEMES[scheme], np.random.default_rng(9))
    if edit_tensors:
        edit_tensors(tensors)
        write_safetensors(os.path.join(dst, "model.safetensors"), tensors)
    if edit_config:
        path = os.path.join(dst, "config.json")
        full = json.load(open(path))
        edit_config(full["quantization_config"])
        json.dump(full, open(path, "w"))
    return dst


P = "model.layers.1.self_attn.q_proj."
expect_failure("missing scales", broken("scales", lambda t: t.pop(P + "scales")), [P + "scales", "missing"])
expect_failure("missing qzeros", broken("qzeros", lambda t: t.pop(P + "qzeros")), [P + "qzeros", "missing"])


def bad_g_idx(t):
    g = t[P + "g_idx"][1].copy()
    g[np.argmax(g == 0)] = 1  # group 0 loses a row, group 1 gains one
    t[P + "g_idx"] = ("I32", g)


expect_failure("bad g_idx", broken("g_idx", bad_g_idx), [P + "g_idx", "not a valid group assignment"])
expect_failure("g_idx out of range", broken("g_idx-range", lambda t: t[P + "g_idx"][1].__setitem__(3, 7)),
               [P + "g_idx", "group 7"])
expect_failure("qzeros shape", broken("qzeros-shape", lambda t: t.__setitem__(P + "qzeros", ("I32", t[P + "qzeros"][1][:, :4].copy()))),
               [P + "qzeros", "has shape [2, 4]"])
expect_failure("scales shape", broken("scales-shape", lambda t: t.__setitem__(P + "scales", ("F16", t[P + "scales"][1][:1].copy()))),
               [P + "scales", "has shape [1, 64]"])
expect_failure("qweight shape", broken("qweight-shape", lambda t: t.__setitem__(P + "qweight", ("I32", t[P + "qweight"][1][:7].copy()))),
               [P + "qweight"])
expect_failure("group size", broken("group", edit_config=lambda q: q.update(group_size=48)),
               ["qweight", "group size 48 does not divide"])
expect_failure("bits", broken("bits", edit_config=lambda q: q.update(bits=3)),
               ["quantization_config.bits", "is 3", "supported: gptq 4 or 8 bits"])
expect_failure("format", broken("format", edit_config=lambda q: q.update(checkpoint_format="marlin")),
               ["quantization_config.checkpoint_format", "'marlin'", "supported:"])
expect_failure("method", broken("method", edit_config=lambda q: q.update(quant_method="bitsandbytes")),
               ["quantization_config.quant_method", "'bitsandbytes'", "supported:"])
expect_failure("weight_packed shape", broken("packed-shape", lambda t: t.__setitem__(
    P + "weight_shape", ("I32", np.array([64, 96], "<i4"))), scheme="int4-group-asym"),
    [P + "weight_packed", "has shape [64, 8], expected [64, 12]"])
expect_failure("weight_zero_point missing", broken("packed-zeros", lambda t: t.pop(P + "weight_zero_point"),
                                                   scheme="int4-group-asym"), [P + "weight_zero_point", "missing"])
expect_failure("pack-quantized bits", broken("packed-bits", edit_config=lambda q: q["config_groups"]["group_0"][
    "weights"].update(num_bits=2), scheme="int4-group-asym"), ["num_bits", "int with 2 bits", "supported:"])
# Groups of 16 inputs are not whole Q4_0 blocks: the weights are expanded to f32, and the run says so.
g16 = os.path.join(work, "gptq-g16")
g16_tensors, g16_exact = {}, {}
for name, w in weights.items():
    if is_linear(name):
        parts, g16_exact[name] = gptq(w, 4, True, False, np.random.default_rng(4), group=16)
        g16_tensors.update({name[:-len("weight")] + k: v for k, v in parts.items()})
    else:
        g16_tensors[name], g16_exact[name] = f32(w), w
write_model(g16, g16_tensors, dict(GPTQ, bits=4, sym=True, desc_act=False, group_size=16))
write_model(g16 + "-dequantized", {k: f32(v) for k, v in g16_exact.items()})
proc = run(["run", prompts_path, "-o", os.path.join(work, "g16.jsonl"), "--model", g16, "--device", "cpu"])
c.check(f"{len(LINEARS) * 3} of {len(LINEARS) * 3} quantized weights expanded to f32" in proc.stderr,
        f"group 16: no note that the weights were expanded:\n{proc.stderr[-600:]}")
c.check(outputs(g16, []) == outputs(g16 + "-dequantized", []), "group 16: tokens differ from the dequantized model's")

def nan_code(t):
    codes = t[P[:-1] + ".weight"][1].copy()
    codes[2, 5] = 0x7F
    t[P[:-1] + ".weight"] = ("F8_E4M3", codes)


expect_failure("fp8 NaN code", broken("fp8-nan", nan_code, scheme="fp8-block"),
               [P + "weight", "NaN code (0x7F) at row 2, column 5"])

N = "model.layers.1.mlp.down_proj."
expect_failure("nvfp4 global scale missing", broken("nvfp4-global", lambda t: t.pop(N + "weight_global_scale"),
                                                    scheme="nvfp4"), [N + "weight_global_scale", "missing"])
expect_failure("nvfp4 global scale zero", broken("nvfp4-zero", lambda t: t.__setitem__(
    N + "weight_global_scale", f32(np.array([0.0]))), scheme="nvfp4"), [N + "weight_global_scale", "not a positive"])
expect_failure("nvfp4 scale dtype", broken("nvfp4-scale", lambda t: t.__setitem__(
    N + "weight_scale", f32(np.ones(t[N + "weight_scale"][1].shape))), scheme="nvfp4"),
    [N + "weight_scale", "has dtype F32, expected F8_E4M3"])
expect_failure("nvfp4 scale shape", broken("nvfp4-scale-shape", lambda t: t.__setitem__(
    N + "weight_scale", ("F8_E4M3", t[N + "weight_scale"][1][:, :3].copy())), scheme="nvfp4"),
    [N + "weight_scale", "has shape [64, 3], expected [64, 6]"])
expect_failure("nvfp4 group size", broken("nvfp4-group", edit_config=lambda q: q["config_groups"]["group_0"][
    "weights"].update(group_size=32), scheme="nvfp4"), ["group_size", "is 32", "supported:"])
c.done()
