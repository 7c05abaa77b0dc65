"""--dummy-dtype mxfp4 on a tiny gpt-oss-like dummy config (the routed experts as MXFP4 blocks, everything
else fp32), on the CPU:
- `cbatch run`: greedy outputs identical across two runs, modes, token budgets and sequence caps, and not
  those of the f32 dummy (the experts really are other weights);
- `cbatch bench`: the JSON's bytes per step count each touched expert at 17/32 byte a weight against the
  f32 dummy's 4 (expected values computed from the config), the rest of a step's bytes unchanged;
- a dense config, or experts whose input features are not whole 32-element blocks: exit 1 naming the option."""
import json
import os
import random

from common import Checks, read_jsonl, run, tmpdir, write_jsonl

c = Checks()
work = tmpdir()

GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 8, "num_experts_per_tok": 2,
           "experts_per_token": 2, "sliding_window": 8, "num_hidden_layers": 3,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention"], "swiglu_limit": 7.0,
           "attention_bias": True, "rope_theta": 150000.0, "vocab_size": 320, "max_position_embeddings": 1024,
           "bos_token_id": 1, "eos_token_id": 2}


def model_args(name, config, dtype):
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    return ["--model", "dummy:" + path, "--dummy-dtype", dtype, "--device", "cpu", "--quiet", "--threads", "2"]


MXFP4 = model_args("gpt-oss", GPT_OSS, "mxfp4")
F32 = model_args("gpt-oss", GPT_OSS, "f32")

rng = random.Random(11)
rows = [{"id": f"r{i}", "prompt_token_ids": [1] + [rng.randrange(3, 320) for _ in range(rng.randint(1, 40))],
         "max_tokens": rng.randint(1, 24), "temperature": 0, "ignore_eos": True} for i in range(24)]
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, rows)


def outputs(model, *extra):
    out = os.path.join(work, "out.jsonl")
    run(["run", prompts, "-o", out] + model + list(extra))
    return {r["id"]: r["output_token_ids"] for r in read_jsonl(out)}


first = outputs(MXFP4)
c.check(len(first) == len(rows) and all(len(first[r["id"]]) == r["max_tokens"] for r in rows),
        f"{len(first)} results for {len(rows)} requests")
for extra in ([], ["--mode", "static"], ["--mode", "sequential"], ["--max-num-seqs", "1"],
              ["--max-num-seqs", "3", "--max-num-batched-tokens", "16"]):
    got = outputs(MXFP4, *extra)
    diff = [k for k in first if got.get(k) != first[k]]
    c.check(not diff, f"mxfp4 {' '.join(extra) or 'again'}: {len(diff)} outputs differ, e.g. {diff[:3]}")
f32 = outputs(F32)
c.check(sum(f32[k] != first[k] for k in first) > len(first) // 2, "mxfp4 and f32 dummies give the same tokens")

# bench: bytes per step as the cost model counts them, per expert touched.
dim, width = GPT_OSS["hidden_size"], GPT_OSS["intermediate_size"]
expert_params = 3 * dim * width  # gate, up and down of one expert
reports = {}
for name, model in (("mxfp4", MXFP4), ("f32", F32)):
    out = os.path.join(work, f"bench-{name}.json")
    run(["bench", "--num-prompts", "12", "--input-len", "8:24", "--output-len", "4:12", "--max-num-seqs", "4",
         "--modes", "continuous,static", "--json", out] + model)
    reports[name] = {r["mode"]: r for r in json.load(open(out))["results"]}
for mode in ("continuous", "static"):
    mx, fp = reports["mxfp4"][mode], reports["f32"][mode]
    fields = ("bytes_per_step", "expert_bytes_per_step", "experts_touched_per_step")
    present = all(f in mx and f in fp for f in fields)
    c.check(present, f"{mode}: bench JSON lacks {fields}: {sorted(mx)}")
    if not present:
        continue
    for name, r, per_weight in (("mxfp4", mx, 17 / 32), ("f32", fp, 4.0)):
        got = r["expert_bytes_per_step"] / r["experts_touched_per_step"]
        want = expert_params * per_weight
        c.check(abs(got - want) <= 1e-9 * want, f"{mode} {name}: {got} bytes per touched expert, expected {want}")
    rest_mx = mx["bytes_per_step"] - mx["expert_bytes_per_step"]
    rest_fp = fp["bytes_per_step"] - fp["expert_bytes_per_step"]
    c.check(mx["steps"] == fp["steps"] and abs(rest_mx - rest_fp) <= 1e-9 * rest_fp,
            f"{mode}: the non-expert bytes per step differ: {rest_mx} against {rest_fp}")
    c.check(mx["bytes_per_step"] < fp["bytes_per_step"], f"{mode}: mxfp4 moves no fewer bytes than f32")

# Refusals: no experts, or experts whose input features are not whole MXFP4 blocks (down's: 80).
dense = model_args("llama", {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
                             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                             "vocab_size": 320, "max_position_embeddings": 1024, "bos_token_id": 1,
                             "eos_token_id": 2}, "mxfp4")
odd = model_args("odd", dict(GPT_OSS, intermediate_size=80), "mxfp4")
for model, says in ((dense, "no experts"), (odd, "80")):
    proc = run(["run", prompts, "-o", os.path.join(work, "bad.jsonl")] + model, check=False)
    c.check(proc.returncode == 1 and "--dummy-dtype mxfp4" in proc.stderr and says in proc.stderr,
            f"exit {proc.returncode}, expected 1 naming --dummy-dtype mxfp4 and {says!r}: {proc.stderr[-300:]}")
proc = run(["run", prompts, "-o", os.path.join(work, "bad.jsonl")] + model_args("odd-f32", dict(GPT_OSS,
           intermediate_size=80), "f32"), check=False)
c.check(proc.returncode == 0, f"the same shape in f32 runs: exit {proc.returncode} {proc.stderr[-300:]}")
c.done()
