"""LoRA adapters on CUDA (skipped without a GPU): the tiny random Llama of lora_files.py with a PEFT adapter
P (rank 4, rsLoRA, bf16; q, v, o, down) and a GGUF LoRA G (rank 8, f16; k, gate, up), one mixed file of
base, P and G requests (plain and OpenAI lines), and Phi-3 (fused qkv_proj and gate_up_proj) with an adapter
on the fused modules and one on q_proj only. Every request's greedy tokens on CUDA fp32 equal the CPU
backend's, in continuous and static mode and with --max-loras 1; each adapter changes most outputs on the
CPU (so the comparison bites); a bf16 run completes every request and its agreement with fp32 is printed.
The hybrids (Qwen3.5 with its gated q and DeltaNet products, Qwen3-Next with its grouped ones, LFM2, Granite
4.0-H, Nemotron-H) and Gemma 4 (its "dense" model: shared K/V layers, K=V global layers of their own head size)
with an adapter on every module kind (lora_hybrid_files.py): CUDA fp32 tokens equal the CPU's, base and adapter
rows in one file.
Refusals: adapters with --quantization fp8; a gate/up/down adapter on a mixture-of-experts layer."""
import json
import os
import sys

from common import Checks, need_cuda_device, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_cuda_device()
need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models as tm  # noqa: E402
from lora_files import (DIM, HD, HEADS, HIDDEN, KV_HEADS, NAME, W, make_pairs, write_gguf_lora,  # noqa: E402
                        write_peft)
import lora_hybrid_files as lh  # noqa: E402

c = Checks()
work = tmpdir()
BASE = os.path.join(work, "base.gguf")
tm.write_gguf(BASE, NAME, W)
P_DIR, G_FILE = os.path.join(work, "adapter-p"), os.path.join(work, "adapter-g.gguf")
write_peft(P_DIR, make_pairs(11, 4, ["q_proj", "v_proj", "o_proj", "down_proj"], 0.08, tm.to_bf16),
           {"peft_type": "LORA", "r": 4, "lora_alpha": 6.0, "use_rslora": True,
            "target_modules": ["q_proj", "v_proj", "o_proj", "down_proj"]})
write_gguf_lora(G_FILE, make_pairs(12, 8, ["k_proj", "gate_proj", "up_proj"], 0.06,
                                   lambda t: t.astype(np.float16).astype(np.float32)), 16.0)
LORAS = ["--lora-modules", f"P={P_DIR}", "--lora-modules", f"G={G_FILE}"]
COMMON = ["--quiet", "--block-size", "8"]

rng = np.random.default_rng(5)
PREFIXES = ["the quick brown fox jumps over the lazy dog and ", "a tiny model of many adapters says: "]
PROMPTS = [PREFIXES[i % 2] + "".join(chr(97 + int(x)) for x in rng.integers(0, 26, 3 + i % 5)) for i in range(8)]


def line(i, prompt, adapter):
    body = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    if adapter is not None:
        body["model"] = adapter
    if i % 4 == 3:
        return {"custom_id": f"{adapter}-{i}", "method": "POST", "url": "/v1/completions", "body": body}
    return {"id": f"{adapter}-{i}", **body}


def result_tokens(row):
    if "response" in row:
        return row["response"]["body"]["choices"][0]["text"]
    return row.get("output_token_ids")


def run_file(path, model, device, extra=()):
    out = os.path.join(work, "out.jsonl")
    run(["run", path, "-o", out, "--model", model, "--device", device] + COMMON + list(extra))
    return {(r.get("custom_id") or r["id"]): result_tokens(r) for r in read_jsonl(out)}


mixed = os.path.join(work, "mixed.jsonl")
write_jsonl(mixed, [line(i, p, a) for i, p in enumerate(PROMPTS) for a in (None, "P", "G")])
cpu = run_file(mixed, BASE, "cpu", LORAS + ["--threads", "2"])
for adapter in ("P", "G"):
    changed = sum(cpu[f"{adapter}-{i}"] != cpu[f"None-{i}"] for i in range(len(PROMPTS)))
    c.check(changed >= 0.7 * len(PROMPTS), f"adapter {adapter} changes only {changed} of {len(PROMPTS)} outputs")
for name, extra in (("continuous", []), ("static", ["--mode", "static", "--max-num-seqs", "5"]),
                    ("max-loras 1", ["--max-loras", "1"]), ("budget 7", ["--max-num-batched-tokens", "7"])):
    got = run_file(mixed, BASE, "cuda", LORAS + ["--dtype", "fp32"] + extra)
    wrong = [k for k in cpu if got.get(k) != cpu[k]]
    c.check(not wrong, f"cuda fp32 {name}: {len(wrong)} of {len(cpu)} differ from the CPU, e.g. "
            f"{[(k, got.get(k), cpu[k]) for k in wrong[:3]]}")
bf16 = run_file(mixed, BASE, "cuda", LORAS + ["--dtype", "bf16"])
c.check(all(bf16.get(k) for k in cpu), "cuda bf16: a request without its output")
print(f"cuda bf16 vs cpu fp32: {sum(bf16.get(k) == cpu[k] for k in cpu)} of {len(cpu)} requests identical")

# Phi-3: fused q|k|v and gate|up products; a q_proj adapter touches only the q rows of the fused product.
W3 = tm.random_weights("phi3")
PHI = os.path.join(work, "phi3")
tm.write_hf(PHI, "phi3", W3)
prng = np.random.default_rng(21)
phi_args = []
for tag, modules, rank in (("fused", (("qkv_proj", HEADS * HD + 2 * KV_HEADS * HD), ("gate_up_proj", 2 * HIDDEN)), 2),
                           ("q", (("q_proj", HEADS * HD),), 3)):
    tensors = {}
    for layer in range(tm.config_of("phi3")["num_hidden_layers"]):
        for m, rows in modules:
            p = f"base_model.model.model.layers.{layer}.{'mlp' if m == 'gate_up_proj' else 'self_attn'}.{m}."
            tensors[p + "lora_A.weight"] = (prng.uniform(-1, 1, (rank, DIM)) * np.sqrt(3.0 / DIM)).astype(np.float32)
            tensors[p + "lora_B.weight"] = (prng.uniform(-1, 1, (rows, rank)) * 0.1).astype(np.float32)
    directory = os.path.join(work, f"phi3-{tag}")
    os.makedirs(directory, exist_ok=True)
    tm.write_safetensors(os.path.join(directory, "adapter_model.safetensors"), tensors)
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": rank, "lora_alpha": 2.0 * rank}, f)
    phi_args += ["--lora-modules", f"{tag}={directory}"]
phi_path = os.path.join(work, "phi3.jsonl")
write_jsonl(phi_path, [{"id": f"{t}-{i}", "prompt": p, "max_tokens": 10, "temperature": 0, "ignore_eos": True,
                        **({"model": t} if t != "base" else {})} for i, p in enumerate(PROMPTS[:6])
                       for t in ("fused", "q", "base")])
phi_cpu = run_file(phi_path, PHI, "cpu", phi_args + ["--threads", "2"])
phi_cuda = run_file(phi_path, PHI, "cuda", phi_args + ["--dtype", "fp32"])
wrong = [k for k in phi_cpu if phi_cuda.get(k) != phi_cpu[k]]
c.check(not wrong, f"phi3 cuda fp32: {wrong} differ from the CPU")
for tag in ("fused", "q"):
    changed = sum(phi_cpu[f"{tag}-{i}"] != phi_cpu[f"base-{i}"] for i in range(6))
    c.check(changed >= 4, f"phi3 adapter {tag} changes only {changed} of 6 outputs")

# The hybrids and Gemma 4: an adapter on every module kind, its rows and base rows in one file, CUDA against the CPU.
hybrid_rows = [{"id": f"{t}-{i}", "prompt": p, "max_tokens": 10, "temperature": 0, "ignore_eos": True,
                **({"model": "A"} if t == "A" else {})} for i, p in enumerate(PROMPTS[:4]) for t in ("A", "base")]
hybrid_path = os.path.join(work, "hybrid.jsonl")
write_jsonl(hybrid_path, hybrid_rows)
for family, (tiny, name, modules) in lh.FAMILIES.items():
    if family == "gemma4_moe":  # its adapter on the dense MLP beside the experts is refused on CUDA (below)
        continue
    weights = tiny.random_weights(name)
    base_dir, adapter_dir = os.path.join(work, family), os.path.join(work, family + "-lora")
    tiny.write_hf(base_dir, name, weights)
    lh.write_peft(adapter_dir, lh.make_adapter(weights, modules, seed=len(family)), family)
    loras = ["--lora-modules", f"A={adapter_dir}"]
    want = run_file(hybrid_path, base_dir, "cpu", loras + ["--threads", "2"])
    got = run_file(hybrid_path, base_dir, "cuda", loras + ["--dtype", "fp32"])
    wrong = [k for k in want if got.get(k) != want[k]]
    c.check(not wrong, f"{family} cuda fp32: {wrong} differ from the CPU, e.g. "
            f"{[(k, got.get(k), want[k]) for k in wrong[:2]]}")
    changed = sum(want[f"A-{i}"] != want[f"base-{i}"] for i in range(4))
    c.check(changed >= 3, f"{family}: the adapter changes only {changed} of 4 outputs")

# A gate/up/down adapter on a mixture-of-experts layer (Gemma 4's dense MLP beside the experts: the CPU takes it)
# is refused on CUDA, naming the adapter, the module and the layer.
moe_weights = lh.tg.random_weights("moe")
moe_dir, moe_lora = os.path.join(work, "gemma4-moe"), os.path.join(work, "gemma4-moe-mlp")
lh.tg.write_hf(moe_dir, "moe", moe_weights)
lh.write_peft(moe_lora, lh.make_adapter(moe_weights, ["mlp.down_proj"], seed=3), "gemma4-moe")
run_file(hybrid_path, moe_dir, "cpu", ["--lora-modules", f"A={moe_lora}", "--threads", "2"])
proc = run(["run", hybrid_path, "-o", os.path.join(work, "never.jsonl"), "--model", moe_dir, "--device", "cuda",
            "--lora-modules", f"A={moe_lora}"] + COMMON, expect_rc=1, check=False)
needles = ("'A'", "mlp.down_proj", "layer 0", "mixture-of-experts")
c.check(proc.returncode == 1 and all(n in proc.stderr for n in needles),
        f"moe refusal: {proc.returncode} {proc.stderr[-300:]}")

# Refused with a message: adapters on FP8 weights.
proc = run(["run", mixed, "-o", os.path.join(work, "never.jsonl"), "--model", BASE, "--device", "cuda",
            "--quantization", "fp8"] + COMMON + LORAS, expect_rc=1, check=False)
c.check(proc.returncode == 1 and "--lora-modules" in proc.stderr, f"fp8 refusal: {proc.returncode} {proc.stderr[-300:]}")
c.done()
