"""gpt-oss on a seeded random-weight tiny model (tiny_models.GPT_OSS_MODELS: window 8 on layers 0 and 2, six
q heads of head_dim 16 over a hidden size of 64, YaRN with truncate: false, sinks, biases, 8 experts top-2)
as a bf16 Hugging Face directory, as the MXFP4 directory the checkpoints ship (same values: the expert
matrices are MXFP4-exact) and as a GGUF, with test_moe.py's checks:
- the float64 reference (family_reference.py) checks itself: the three files give the same logits; routing
  is not degenerate and its k-th / (k+1)-th router gaps are clear on the whole greedy path (PROMPT_SEED);
  dropping any feature changes the greedy tokens (sinks removed, and sinks zeroed; windows; YaRN and its
  truncate: false; q/k/v and o biases; router bias; the top-k-then-softmax rule; expert biases; the SwiGLU
  clamp), so cbatch missing one fails below;
- cbatch's greedy tokens (CPU) of each file equal the reference's decisive prefix, and each other; outputs
  are bit-identical across modes, token budgets and sequence caps; the trace counts experts touched;
  `inspect` names the family and its features;
- bad files: a missing or misshapen sinks, bias or expert bias tensor, MXFP4 blocks of the wrong size,
  experts per token above the experts: exit 1 before any request, stderr names the tensor or key."""
import json
import os
import time

from common import need_modules, run, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

import family_reference as reference  # noqa: E402
import test_moe as moe  # noqa: E402
import tiny_models  # noqa: E402

# Least router gap on these prompts (float64, whole greedy path) 0.0080; every reference token has a top-2
# margin above moe.MARGIN (48 decisive tokens of 48).
PROMPT_SEED = 6
c, work = moe.c, moe.work


def check_formats_agree(models, prompt):
    base = moe.prefill_logits(models[0][1], prompt)
    for label, m in models[1:]:
        diff = float(np.abs(moe.prefill_logits(m, prompt) - base).max())
        c.check(diff < 1e-9, f"gpt-oss: the reference's logits of the {label} and the bf16 directory differ by "
                             f"{diff:.3g}")


def check_inspect(model):
    text = run(["inspect", "--model", model]).stdout
    for needle in ("architecture: gpt-oss\n", "attention sinks", "output projection bias", "clamped SwiGLU", "router bias",
                   "top-2 of the logits, softmax over them", "expert biases", "sliding window 8 on 2 of 3"):
        c.check(needle in text, f"gpt-oss inspect of {model} does not say {needle!r}:\n{text}")


def write_bad_hf(label, weights, name="gpt-oss", config_edit=None):
    path = os.path.join(work, f"bad-{label}")
    tiny_models.write_hf(path, name, weights)
    if config_edit:
        config_path = os.path.join(path, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config.update(config_edit)
        with open(config_path, "w") as f:
            json.dump(config, f)
    return path


def check_bad_files(weights):
    p = "model.layers.1."
    without = lambda key: {k: t for k, t in weights.items() if k != p + key}  # noqa: E731
    reshaped = lambda key: dict(weights, **{p + key: weights[p + key][..., :-1]})  # noqa: E731
    for key in ("self_attn.sinks", "self_attn.o_proj.bias", "self_attn.q_proj.bias", "mlp.router.bias",
                "mlp.experts.gate_up_proj_bias", "mlp.experts.down_proj_bias"):
        moe.expect_refusal(f"gpt-oss hf missing {key}", write_bad_hf("missing", without(key)), p + key)
        moe.expect_refusal(f"gpt-oss hf wrong shape of {key}", write_bad_hf("shape", reshaped(key)), p + key)
    mxfp4 = tiny_models.mxfp4_experts(weights)
    blocks = p + "mlp.experts.gate_up_proj_blocks"
    bad = dict(mxfp4, **{blocks: np.zeros(mxfp4[blocks].shape[:-1] + (17,), np.uint8)})
    moe.expect_refusal("gpt-oss mxfp4 blocks of 17 bytes", write_bad_hf("blocks", bad, "gpt-oss-mxfp4"), blocks)
    bad = dict(mxfp4, **{blocks: mxfp4[blocks][:, :-2], blocks[:-6] + "scales": mxfp4[blocks[:-6] + "scales"][:, :-2]})
    moe.expect_refusal("gpt-oss mxfp4 blocks of too few rows", write_bad_hf("rows", bad, "gpt-oss-mxfp4"), blocks)
    moe.expect_refusal("gpt-oss hf experts_per_token > experts",
                       write_bad_hf("topk", weights, config_edit={"num_experts_per_tok": 9}), "num_experts_per_tok")

    conf, b = tiny_models.config_of("gpt-oss"), "blk.1."
    for tensor, shape in (("attn_sinks.weight", (5,)), ("attn_output.bias", (63,)), ("ffn_gate_inp.bias", (7,)),
                          ("ffn_up_exps.bias", (8, 31)), ("ffn_down_exps.bias", (7, 64))):
        path = os.path.join(work, "bad-missing.gguf")
        tiny_models.write_gguf(path, "gpt-oss", weights, edits={b + tensor: None})
        moe.expect_refusal(f"gpt-oss gguf missing {tensor}", path, b + tensor)
        path = os.path.join(work, "bad-shape.gguf")
        tiny_models.write_gguf(path, "gpt-oss", weights, edits={b + tensor: np.zeros(shape, np.float32)})
        moe.expect_refusal(f"gpt-oss gguf wrong shape of {tensor}", path, b + tensor)
    path = os.path.join(work, "bad-topk.gguf")
    tiny_models.write_gguf(path, "gpt-oss", weights, config=dict(conf, num_experts_per_tok=9))
    moe.expect_refusal("gpt-oss gguf expert_used_count > expert_count", path, "expert_used_count")


def main():
    start = time.time()
    prompts = moe.make_prompts(PROMPT_SEED)
    c.check(min(map(len, prompts)) > tiny_models.GPT_OSS["sliding_window"], "gpt-oss: a prompt within the window")
    rows = [{"id": i, "prompt_token_ids": p, "max_tokens": moe.NUM_TOKENS, "temperature": 0, "ignore_eos": True}
            for i, p in enumerate(prompts)]
    prompts_path = os.path.join(work, "gpt-oss-prompts.jsonl")
    write_jsonl(prompts_path, rows)
    weights, hf_dir, mxfp4_dir, gguf_path = tiny_models.write_gpt_oss(work)
    model = reference.load_hf(hf_dir)
    check_formats_agree([("bf16 directory", model), ("MXFP4 directory", reference.load_hf(mxfp4_dir)),
                         ("GGUF", reference.load_gguf(gguf_path))], prompts[-1])
    expected = moe.check_routing("gpt-oss", model, prompts)
    moe.check_sensitive("gpt-oss", model, prompts, expected)

    outs = {path: moe.outputs(path, prompts_path) for path in (hf_dir, mxfp4_dir, gguf_path)}
    for path, got in outs.items():
        moe.check_equal(f"gpt-oss {os.path.basename(path)}", got, expected)
    lengths = [len(ids) for ids in moe.decisive(expected)]
    prefixes = {json.dumps([o[:n] for o, n in zip(got, lengths)]) for got in outs.values()}
    c.check(len(prefixes) == 1, f"gpt-oss: the three files' outputs differ: {outs}")
    for options in moe.INVARIANCE:
        c.check(moe.outputs(hf_dir, prompts_path, options) == outs[hf_dir], f"gpt-oss: outputs change with {options}")
    moe.check_trace("gpt-oss", hf_dir, prompts_path)
    check_inspect(mxfp4_dir)
    check_inspect(gguf_path)
    check_bad_files(weights)
    print(f"gpt-oss in {time.time() - start:.1f} s")
    c.done()


main()
