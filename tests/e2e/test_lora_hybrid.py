"""LoRA adapters on the hybrid families and Gemma 4 on the CPU (--lora-modules), on the seeded tiny models of
tiny_hybrid_models.py (Qwen3.5 dense and MoE, Qwen3-Next, LFM2, Granite 4.0-H, Nemotron-H) and
tiny_gemma4_models.py ("dense": per-layer head sizes, K=V global layers, layers reading another's K/V; "moe": the
dense MLP beside the experts), written as Hugging Face directories. Per family, an adapter on every module kind
the family has (the attention's q, k, v, o with Qwen3.5's gated q of 2 q_dim rows; the DeltaNet's in_proj_qkv / z
/ b / a or Qwen3-Next's fused in_proj_qkvz / ba and out_proj; LFM2's conv.in_proj / out_proj and feed_forward.w1 /
w3 / w2; Granite's mamba.in_proj / out_proj and shared_mlp.input_linear / output_linear; Nemotron-H's mixer.* of
its Mamba-2, attention and relu^2 MLP layers; the gated MLPs; Qwen3.5-MoE's and Qwen3-Next's mixers only, their
FFN being experts), written as a PEFT directory and merged into the base weights as a model of its own; LFM2's and
Qwen3.5's also as a llama.cpp GGUF LoRA on their GGUF (Qwen3.5's value heads tiled in both, as llama.cpp's
converter writes them). Checks:
- every adapter request's greedy tokens equal its merged model's, base requests equal the base model's, and the
  adapter changes most outputs;
- Gemma 4's shared layers' k/v projections (in the checkpoint, never used) are skipped with a warning naming them;
- a file mixing two adapters and the base on Qwen3.5, Nemotron-H and Gemma 4 gives bit-identical tokens and logprobs
  across modes, token budgets, block sizes and thread counts;
- bad adapters exit 1 before anything runs, naming the adapter, the module and the layer: a DeltaNet module on an
  attention layer, the gated q with q_dim rows, a Mamba-2 module on Nemotron-H's MLP layer, a shared expert, a
  v_proj on Gemma 4's K=V layer;
- Qwen3.5's GGUF holds the DeltaNet value heads tiled (as llama.cpp's converter writes them; the tiny model has
  twice as many value heads as key heads, so the order differs): the PEFT adapter on every module kind, its value
  heads put in the tiled order at load, gives on the GGUF the tokens of the merged directory (and of the adapter
  on the Hugging Face base), and the GGUF LoRA (tiled) on the Hugging Face base likewise."""
import os
import sys

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_hybrid_models as th  # noqa: E402
from lora_hybrid_files import (ATTN, FAMILIES, RANK, make_adapter, merged, targets,  # noqa: E402
                               write_gguf_lora, write_peft)

COMMON = ["--device", "cpu", "--quiet"]
PROMPTS = ["the quick brown fox jumps over", "a tiny model of many adapters says", "one two three four five six",
           "hybrid layers keep a state"]
NUM_TOKENS = 8
work = tmpdir()
c = Checks()


def requests(tag, adapter=None, logprobs=False):
    rows = []
    for i, prompt in enumerate(PROMPTS):
        row = {"id": f"{tag}-{i}", "prompt": prompt, "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
        if adapter:
            row["model"] = adapter
        if logprobs:
            row["logprobs"] = 1
        rows.append(row)
    return rows


def run_rows(rows, model, extra=(), name="out"):
    path, out = os.path.join(work, name + ".jsonl"), os.path.join(work, name + "-out.jsonl")
    write_jsonl(path, rows)
    blocks = [] if "--block-size" in extra else ["--block-size", "8"]
    proc = run(["run", path, "-o", out, "--model", model] + COMMON + blocks + list(extra))
    return {r["id"]: r for r in read_jsonl(out)}, proc.stderr


def tokens(results):
    return {k: r["output_token_ids"] for k, r in results.items()}


def bad_start(label, model, adapter_dir, *needles):
    proc = run(["run", os.path.join(work, "bad.jsonl"), "-o", os.path.join(work, "bad-out.jsonl"), "--model", model,
                "--lora-modules", f"BAD={adapter_dir}"] + COMMON, expect_rc=1, check=False)
    ok = proc.returncode == 1 and all(n in proc.stderr for n in needles)
    c.check(ok, f"{label}: exit {proc.returncode}, stderr {proc.stderr.strip()[-400:]!r} lacks {needles}")


write_jsonl(os.path.join(work, "bad.jsonl"), requests("bad"))
models = {}
for family, (tiny, name, modules) in FAMILIES.items():
    weights = tiny.random_weights(name)
    base_dir, merged_dir = os.path.join(work, family), os.path.join(work, family + "-merged")
    tiny.write_hf(base_dir, name, weights)
    pairs = make_adapter(weights, modules, seed=len(family))
    found = {m for _, _, m in targets(weights, modules)}
    c.check(found == set(modules), f"{family}: the model lacks {set(modules) - found}")
    adapter_dir = os.path.join(work, family + "-lora")
    write_peft(adapter_dir, pairs, family)
    tiny.write_hf(merged_dir, name, merged(weights, pairs))
    models[family] = (base_dir, adapter_dir, weights, pairs)
    # One file: the adapter's requests and the base's; references from the merged and the base models.
    got, stderr = run_rows(requests("A", "A") + requests("base"), base_dir, ["--lora-modules", f"A={adapter_dir}"])
    ref_a, _ = run_rows(requests("A"), merged_dir)
    ref_base, _ = run_rows(requests("base"), base_dir)
    got_t, ref_t = tokens(got), {**tokens(ref_a), **tokens(ref_base)}
    for key in ref_t:
        c.check(got_t.get(key) == ref_t[key], f"{family} {key}: {got_t.get(key)} != merged/base {ref_t[key]}")
    changed = sum(ref_t[f"A-{i}"] != ref_t[f"base-{i}"] for i in range(len(PROMPTS)))
    c.check(changed >= len(PROMPTS) - 1, f"{family}: the adapter changes only {changed} of {len(PROMPTS)} outputs")
    if family == "gemma4":  # layers 4 and 5 read layers 3's and 2's K/V: their k/v adapters are skipped, said so
        # (layer 5 is a K=V global layer: the checkpoint holds its k_proj alone)
        for layer, module in ((4, "k_proj"), (4, "v_proj"), (5, "k_proj")):
            c.check(f"layer {layer} self_attn.{module} is skipped" in stderr,
                    f"gemma4: no warning about layer {layer}'s {module}: {stderr[-600:]!r}")
    if family in ("lfm2", "qwen3_5"):  # the same adapter as a GGUF LoRA on the GGUF base
        gguf_base, gguf_lora = os.path.join(work, family + ".gguf"), os.path.join(work, family + "-lora.gguf")
        th.write_gguf(gguf_base, name, weights)
        write_gguf_lora(gguf_lora, pairs, name)
        got_g, _ = run_rows(requests("A", "A") + requests("base"), gguf_base, ["--lora-modules", f"A={gguf_lora}"])
        c.check(tokens(got_g) == ref_t, f"{family} GGUF LoRA on the GGUF: {tokens(got_g)} != {ref_t}")

# Two adapters and the base in one file: bit-identical tokens and logprobs across modes, budgets, blocks, threads.
SECOND = {"qwen3_5": ATTN, "nemotron_h": ["mixer.in_proj", "mixer.o_proj", "mixer.down_proj"], "gemma4": ATTN}
for family, second_modules in SECOND.items():
    base_dir, adapter_dir, weights, _ = models[family]
    second = os.path.join(work, family + "-second")
    write_peft(second, make_adapter(weights, second_modules, seed=99), family)
    rows = [r for i in range(len(PROMPTS)) for r in (requests("A", "A", True)[i], requests("S", "S", True)[i],
                                                     requests("base", None, True)[i])]
    loras = ["--lora-modules", f"A={adapter_dir}", "--lora-modules", f"S={second}"]
    first = None
    for extra in (["--threads", "2"], ["--mode", "static", "--threads", "1"], ["--mode", "sequential"],
                  ["--max-num-batched-tokens", "7", "--block-size", "4"], ["--max-num-seqs", "2", "--threads", "3"],
                  ["--max-loras", "1"]):
        got, _ = run_rows(rows, base_dir, loras + extra, name="mixed")
        view = {k: (r["output_token_ids"], r["logprobs"]) for k, r in got.items()}
        if first is None:
            first = view
            changed = sum(view[f"S-{i}"][0] != view[f"base-{i}"][0] for i in range(len(PROMPTS)))
            c.check(changed >= len(PROMPTS) - 1, f"{family}: the second adapter changes only {changed} outputs")
        else:
            c.check(view == first, f"{family} mixed file differs under {extra}")

# Bad adapters: exit 1 at start, naming the adapter, the module and the layer.
def bad_adapter(label, family, weight_name, rows, cols, *needles):
    base_dir = models[family][0]
    directory = os.path.join(work, "bad-" + label)
    write_peft(directory, {weight_name: (np.zeros((RANK, cols), np.float32), np.zeros((rows, RANK), np.float32))},
               family)
    bad_start(label, base_dir, directory, "'BAD'", *needles)


Q35 = "model.language_model.layers."
qc = th.config_of("qwen3_5")
q_rows = qc["num_attention_heads"] * qc["head_dim"]
bad_adapter("deltanet module on attention", "qwen3_5", Q35 + "1.linear_attn.out_proj.weight", 64, 64,
            "layer 1 linear_attn.out_proj", "no such projection")
bad_adapter("gated q without gate rows", "qwen3_5", Q35 + "1.self_attn.q_proj.weight", q_rows, 64,
            "layer 1 self_attn.q_proj", "do not match", str(2 * q_rows))
bad_adapter("mamba module on an MLP layer", "nemotron_h", "backbone.layers.1.mixer.in_proj.weight", 64, 64,
            "layer 1 mixer.in_proj", "no such projection")
bad_adapter("shared expert", "qwen3_5_moe", Q35 + "0.mlp.shared_expert.gate_proj.weight", 48, 64,
            "layer 0 mlp.shared_expert.gate_proj", "experts")
bad_adapter("v_proj of a K=V layer", "gemma4", Q35 + "2.self_attn.v_proj.weight", 32, 64,
            "layer 2 self_attn.v_proj", "values are its keys")

# Qwen3.5's GGUF (value heads tiled by llama.cpp's converter) with the PEFT adapter on every module kind (value
# heads in Hugging Face's order), and the Hugging Face base with the GGUF LoRA (tiled): both the merged directory's
# tokens, which the same adapter gives on its own format's base (checked above).
c.check(qc["linear_num_value_heads"] > qc["linear_num_key_heads"], "qwen3_5: the value heads are not tiled")
q_dir, q_peft = models["qwen3_5"][0], models["qwen3_5"][1]
q_gguf, q_gguf_lora = os.path.join(work, "qwen3_5.gguf"), os.path.join(work, "qwen3_5-lora.gguf")
ref, _ = run_rows(requests("A"), os.path.join(work, "qwen3_5-merged"))
for label, base, adapter in (("PEFT adapter on the GGUF", q_gguf, q_peft),
                             ("GGUF LoRA on the Hugging Face base", q_dir, q_gguf_lora)):
    got, _ = run_rows(requests("A", "A"), base, ["--lora-modules", f"A={adapter}"])
    c.check(tokens(got) == tokens(ref), f"qwen3_5 {label}: {tokens(got)} != merged {tokens(ref)}")

c.done()
