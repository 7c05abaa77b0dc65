"""LoRA adapters on the CPU (--lora-modules), on tiny_models.py's random Llama written as a GGUF (q/k rows
permuted, so a PEFT adapter's q rows must be reordered to match) and two adapters written here: P, a PEFT
directory (rank 4, rsLoRA, bf16; q, v, o, down) and G, a llama.cpp GGUF LoRA (rank 8, f16; k, gate, up). The
test also writes each adapter merged into the base weights as a model of its own, and checks:
- one mixed file (base, P and G requests, plain and OpenAI lines, prompts sharing long prefixes so the
  prefix cache is hit across adapters): every adapter request's greedy tokens equal the merged model's,
  base requests equal the base model's, and each adapter changes most outputs (so the test bites);
- the same outputs across modes, budgets, batch sizes, --max-loras 1 (rotation) and prefix caching off;
- Phi-3 (a Hugging Face directory with fused qkv_proj and gate_up_proj): an adapter on the fused modules
  and one on q_proj only (it touches only the q rows of the fused product) equal their merged models;
- n = 2 and a choice constraint under an adapter; the result line records the adapter;
- an unknown adapter name is an error line at its line, the rest runs (exit 2);
- bad adapters exit 1 at start naming the adapter and the problem; another base model is a warning."""
import json
import os
import shutil
import sys

from common import Checks, need_modules, read_jsonl, run, tmpdir, write_jsonl

need_modules("numpy", "gguf")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models as tm  # noqa: E402

from lora_files import (DIM, HD, HEADS, HIDDEN, KV_HEADS, LAYERS, NAME, W, make_pairs,  # noqa: E402
                        merged_weights, write_gguf_lora, write_peft)

work = tmpdir()
BASE = os.path.join(work, "base.gguf")
tm.write_gguf(BASE, NAME, W)
P_RANK, P_ALPHA = 4, 6.0
P_PAIRS = make_pairs(11, P_RANK, ["q_proj", "v_proj", "o_proj", "down_proj"], 0.08, tm.to_bf16)
P_DIR = os.path.join(work, "adapter-p")
P_CONFIG = {"peft_type": "LORA", "r": P_RANK, "lora_alpha": P_ALPHA, "use_rslora": True,
            "target_modules": ["q_proj", "v_proj", "o_proj", "down_proj"], "base_model_name_or_path": "base.gguf"}
write_peft(P_DIR, P_PAIRS, P_CONFIG)
G_RANK, G_ALPHA = 8, 16.0
G_PAIRS = make_pairs(12, G_RANK, ["k_proj", "gate_proj", "up_proj"], 0.06, lambda t: t.astype(np.float16).astype(np.float32))
G_FILE = os.path.join(work, "adapter-g.gguf")
write_gguf_lora(G_FILE, G_PAIRS, G_ALPHA)
MERGED = {"P": os.path.join(work, "merged-p.gguf"), "G": os.path.join(work, "merged-g.gguf")}
tm.write_gguf(MERGED["P"], NAME, merged_weights(P_PAIRS, P_ALPHA / np.sqrt(P_RANK)))
tm.write_gguf(MERGED["G"], NAME, merged_weights(G_PAIRS, G_ALPHA / G_RANK))
LORAS = ["--lora-modules", f"P={P_DIR}", "--lora-modules", f"G={G_FILE}"]
COMMON = ["--device", "cpu", "--quiet", "--threads", "2", "--block-size", "8"]

# Prompts: three shared prefixes of 20-40 bytes (byte-level tokens), distinct endings.
rng = np.random.default_rng(5)
PREFIXES = ["the quick brown fox jumps over the lazy dog and ", "a tiny model of many adapters says: ",
            "one two three four five six seven eight "]
PROMPTS = [PREFIXES[i % 3] + "".join(chr(97 + int(x)) for x in rng.integers(0, 26, 3 + i % 5)) for i in range(10)]


def line(i, prompt, adapter, openai):
    base = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    if adapter is not None:
        base["model"] = adapter
    if openai:
        return {"custom_id": f"{adapter}-{i}", "method": "POST", "url": "/v1/completions", "body": base}
    return {"id": f"{adapter}-{i}", **base}


def key(row):
    return row.get("custom_id") or row["id"]


def tokens(row):
    if "response" in row:  # OpenAI lines carry the text only
        return row["response"]["body"]["choices"][0]["text"]
    return row["output_token_ids"]


c = Checks()
ADAPTERS = [None, "P", "G", "base.gguf"]
rows = [line(i, p, a, openai=(i % 4 == 3)) for i, p in enumerate(PROMPTS) for a in ADAPTERS]
mixed = os.path.join(work, "mixed.jsonl")
write_jsonl(mixed, rows)


def run_file(path, model, extra=()):
    out = os.path.join(work, "out.jsonl")
    run(["run", path, "-o", out, "--model", model] + COMMON + list(extra))
    return {key(r): r for r in read_jsonl(out)}


# References: the plain rows of each adapter's prompts through the merged model (no adapter flag).
def reference(adapter, model):
    ref_rows = [dict(line(i, p, None, openai=(i % 4 == 3)), **({"custom_id": f"{adapter}-{i}"} if i % 4 == 3 else
                                                               {"id": f"{adapter}-{i}"})) for i, p in enumerate(PROMPTS)]
    path = os.path.join(work, f"ref-{adapter}.jsonl")
    write_jsonl(path, ref_rows)
    return run_file(path, model)


refs = {"P": reference("P", MERGED["P"]), "G": reference("G", MERGED["G"]), "None": reference("None", BASE)}
refs["base.gguf"] = {k.replace("None", "base.gguf"): v for k, v in refs["None"].items()}


def compare(name, results):
    c.check(len(results) == len(rows), f"{name}: {len(results)} results for {len(rows)} lines")
    for adapter in ADAPTERS:
        tag = str(adapter)
        for i in range(len(PROMPTS)):
            k = f"{tag}-{i}"
            got, want = tokens(results[k]), tokens(refs[tag][k])
            c.check(got == want, f"{name}: {k} {got} != the merged model's {want}")


mixed_results = run_file(mixed, BASE, LORAS)
compare("mixed", mixed_results)
for adapter in ("P", "G"):
    changed = sum(tokens(refs[adapter][f"{adapter}-{i}"]) != tokens(refs["None"][f"None-{i}"]) for i in range(len(PROMPTS)))
    c.check(changed >= 0.7 * len(PROMPTS), f"adapter {adapter} changes only {changed} of {len(PROMPTS)} outputs")
c.check(mixed_results["P-0"].get("lora") == "P", f"the result line records the adapter: {mixed_results['P-0']}")
c.check("lora" not in mixed_results["None-0"] and "lora" not in mixed_results["base.gguf-0"], "base lines name no adapter")
c.check(mixed_results["G-3"]["response"]["body"]["model"] == "G", "OpenAI body.model is the adapter")

for name, extra in (("static", ["--mode", "static", "--max-num-seqs", "5"]), ("sequential", ["--mode", "sequential"]),
                    ("budget 7", ["--max-num-batched-tokens", "7"]), ("max-loras 1", ["--max-loras", "1"]),
                    ("max-loras 1 static", ["--max-loras", "1", "--mode", "static"]),
                    ("no prefix cache", ["--no-enable-prefix-caching", "--max-num-seqs", "3"])):
    compare(name, run_file(mixed, BASE, LORAS + extra))

# n = 2 and a choice constraint under adapter P: the same as the merged model.
extra_rows = [{"id": "n2", "prompt": PROMPTS[1], "n": 2, "max_tokens": 8, "temperature": 0, "ignore_eos": True},
              {"id": "choice", "prompt": PROMPTS[2], "max_tokens": 8, "temperature": 0,
               "structured_outputs": {"choice": ["alpha", "beta", "gamma", "delta"]}}]
extra_path, extra_lora = os.path.join(work, "extra.jsonl"), os.path.join(work, "extra-lora.jsonl")
write_jsonl(extra_path, extra_rows)
write_jsonl(extra_lora, [dict(r, model="P") for r in extra_rows])
want, got = run_file(extra_path, MERGED["P"]), run_file(extra_lora, BASE, LORAS)
c.check([o["output_token_ids"] for o in got["n2"]["outputs"]] == [o["output_token_ids"] for o in want["n2"]["outputs"]],
        f"n = 2 under P: {got['n2']} != {want['n2']}")
c.check(got["choice"]["text"] == want["choice"]["text"], f"choice under P: {got['choice']} != {want['choice']}")

# An unknown adapter: an error line at its line; the rest runs.
bad_rows = [line(0, PROMPTS[0], "P", False), line(1, PROMPTS[1], "nope", False), line(2, PROMPTS[2], None, False)]
bad_path, out = os.path.join(work, "unknown.jsonl"), os.path.join(work, "unknown-out.jsonl")
write_jsonl(bad_path, bad_rows)
run(["run", bad_path, "-o", out, "--model", BASE] + COMMON + LORAS, expect_rc=2)
results = {key(r): r for r in read_jsonl(out)}
err = results.get("nope-1", {}).get("error", {})
c.check("line 2" in err.get("message", "") and "'nope'" in err.get("message", ""), f"unknown adapter error: {results}")
c.check(tokens(results["P-0"]) == tokens(refs["P"]["P-0"]) and "output_token_ids" in results["None-2"],
        "the other lines ran")

# Embedding lines (--task embed) apply their adapter: P's vectors equal the merged model's, the base's the
# base model's; an unknown name is an error line there too.
EMBED = ["--task", "embed", "--pooling", "last"]
emb_rows = [{"id": f"{a}-{i}", "input": p, **({"model": a} if a else {})}
            for i, p in enumerate(PROMPTS[:4]) for a in (None, "P", "nope")]
emb_rows.append({"custom_id": "P-openai", "method": "POST", "url": "/v1/embeddings",
                 "body": {"model": "P", "input": PROMPTS[:2]}})
emb_path, emb_out = os.path.join(work, "embed.jsonl"), os.path.join(work, "embed-out.jsonl")
write_jsonl(emb_path, emb_rows)
run(["run", emb_path, "-o", emb_out, "--model", BASE] + COMMON + LORAS + EMBED, expect_rc=2)
emb = {key(r): r for r in read_jsonl(emb_out)}


def vectors(model, prompts):
    path, out = os.path.join(work, "embed-ref.jsonl"), os.path.join(work, "embed-ref-out.jsonl")
    write_jsonl(path, [{"id": i, "input": p} for i, p in enumerate(prompts)])
    run(["run", path, "-o", out, "--model", model] + COMMON + EMBED)
    return [np.array(r["embedding"]) for r in sorted(read_jsonl(out), key=lambda r: r["id"])]


want_p, want_base = vectors(MERGED["P"], PROMPTS[:4]), vectors(BASE, PROMPTS[:4])
for i in range(4):
    got_p, got_base = np.array(emb[f"P-{i}"]["embedding"]), np.array(emb[f"None-{i}"]["embedding"])
    c.check(np.abs(got_p - want_p[i]).max() < 1e-4, f"embedding P-{i} differs from the merged model's")
    c.check(emb[f"P-{i}"].get("lora") == "P" and "lora" not in emb[f"None-{i}"], f"the lines name their adapter: {emb[f'P-{i}']}")
    c.check(np.abs(got_p - want_base[i]).max() > 1e-2, f"embedding P-{i} is the base model's: the adapter was ignored")
    c.check(np.abs(got_base - want_base[i]).max() < 1e-4, f"embedding None-{i} differs from the base model's")
    message = emb[f"nope-{i}"].get("error", {}).get("message", "")
    c.check("'nope' is neither a LoRA adapter" in message, f"embedding with an unknown adapter: {emb[f'nope-{i}']}")
openai_p = emb["P-openai"]["response"]["body"]
c.check(openai_p["model"] == "P" and all(np.abs(np.array(d["embedding"]) - want_p[d["index"]]).max() < 1e-4
                                         for d in openai_p["data"]), f"OpenAI embeddings under P: {openai_p}")

# Bad adapters: exit 1 at start, naming the adapter and the problem.
def bad_start(name, lora_args, *needles, extra=(), device="cpu"):
    common = ["--device", device] + COMMON[2:]
    proc = run(["run", mixed, "-o", os.path.join(work, "never.jsonl"), "--model", BASE] + common + lora_args +
               list(extra), expect_rc=1, check=False)
    ok = proc.returncode == 1 and all(n in proc.stderr for n in needles)
    c.check(ok, f"{name}: exit {proc.returncode}, stderr {proc.stderr.strip()[-400:]!r} lacks {needles}")


bad_start("missing", ["--lora-modules", "X=" + os.path.join(work, "nowhere")], "'X'", "no such file")
bad_start("rank", LORAS, "'G'", "rank 8", "--max-lora-rank 4", extra=["--max-lora-rank", "4"])
bad_start("duplicate", LORAS + ["--lora-modules", f"P={G_FILE}"], "'P'", "twice")
bad_start("no equals", ["--lora-modules", "P"], "NAME=PATH")
fused = os.path.join(work, "fused")
write_peft(fused, {}, P_CONFIG)
tm.write_safetensors(os.path.join(fused, "adapter_model.safetensors"), {
    "base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight": np.zeros((4, DIM), np.float32),
    "base_model.model.model.layers.0.self_attn.qkv_proj.lora_B.weight": np.zeros((HEADS * HD + 2 * KV_HEADS * HD, 4),
                                                                                 np.float32)})
bad_start("target", ["--lora-modules", f"F={fused}"], "'F'", "qkv_proj", "no such projection")
shapes = os.path.join(work, "shapes")
write_peft(shapes, {(0, "q_proj"): (np.zeros((4, DIM + 8), np.float32), np.zeros((HEADS * HD, 4), np.float32))}, P_CONFIG)
bad_start("shapes", ["--lora-modules", f"S={shapes}"], "'S'", "do not match")
other_arch = os.path.join(work, "qwen2-lora.gguf")
write_gguf_lora(other_arch, {k: v for k, v in G_PAIRS.items() if k[0] == 0}, G_ALPHA, arch="qwen2")
bad_start("architecture", ["--lora-modules", f"Q={other_arch}"], "'Q'", "architecture 'qwen2'")
not_adapter = os.path.join(work, "not-adapter.gguf")
write_gguf_lora(not_adapter, {k: v for k, v in G_PAIRS.items() if k[0] == 0}, G_ALPHA, general_type="model")
bad_start("not an adapter", ["--lora-modules", f"M={not_adapter}"], "'M'", "not 'adapter'")
no_config = os.path.join(work, "no-config")
shutil.copytree(P_DIR, no_config)
os.remove(os.path.join(no_config, "adapter_config.json"))
bad_start("no config", ["--lora-modules", f"C={no_config}"], "'C'", "adapter_config.json")

# Phi-3: fused projections.
W3 = tm.random_weights("phi3")
PHI_BASE = os.path.join(work, "phi3")
tm.write_hf(PHI_BASE, "phi3", W3)
QKV = HEADS * HD + 2 * KV_HEADS * HD
prng = np.random.default_rng(21)


def phi_pairs(module, rows, rank):
    out = {}
    for layer in range(LAYERS):
        a = (prng.uniform(-1, 1, (rank, DIM)) * np.sqrt(3.0 / DIM)).astype(np.float32)
        out[(layer, module)] = (a, (prng.uniform(-1, 1, (rows, rank)) * 0.1).astype(np.float32))
    return out


fused_pairs = {**phi_pairs("qkv_proj", QKV, 2), **phi_pairs("gate_up_proj", 2 * HIDDEN, 2)}
q_pairs = phi_pairs("q_proj", HEADS * HD, 3)
phi_merged = {}
for tag, pairs, alpha, rank in (("fused", fused_pairs, 4.0, 2), ("q", q_pairs, 3.0, 3)):
    directory = os.path.join(work, f"phi3-{tag}-lora")
    os.makedirs(directory, exist_ok=True)
    tensors = {}
    w = {k: v.copy() for k, v in W3.items()}
    for (layer, m), (a, b) in pairs.items():
        part = "mlp" if m == "gate_up_proj" else "self_attn"
        p = f"base_model.model.model.layers.{layer}.{part}.{m}."
        tensors[p + "lora_A.weight"], tensors[p + "lora_B.weight"] = a, b
        target = f"model.layers.{layer}.{part}.{'qkv_proj' if m == 'q_proj' else m}.weight"
        delta = (alpha / rank) * (b.astype(np.float64) @ a.astype(np.float64))
        w[target][:delta.shape[0]] = (w[target][:delta.shape[0]].astype(np.float64) + delta).astype(np.float32)
    tm.write_safetensors(os.path.join(directory, "adapter_model.safetensors"), tensors)
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "base_model_name_or_path": "phi3"}, f)
    phi_merged[tag] = os.path.join(work, f"phi3-merged-{tag}")
    tm.write_hf(phi_merged[tag], "phi3", w)
    phi_merged[tag + "-adapter"] = directory
phi_prompts = [{"id": f"{t}-{i}", "prompt": p, "max_tokens": 10, "temperature": 0, "ignore_eos": True}
               for i, p in enumerate(PROMPTS[:6]) for t in ("fused", "q", "base")]
phi_path = os.path.join(work, "phi3.jsonl")
write_jsonl(phi_path, [dict(r, model=r["id"].split("-")[0]) if not r["id"].startswith("base") else r for r in phi_prompts])
got = run_file(phi_path, PHI_BASE, ["--lora-modules", f"fused={phi_merged['fused-adapter']}",
                                    "--lora-modules", f"q={phi_merged['q-adapter']}"])
write_jsonl(phi_path, phi_prompts)
phi_refs = {"fused": run_file(phi_path, phi_merged["fused"]), "q": run_file(phi_path, phi_merged["q"]),
            "base": run_file(phi_path, PHI_BASE)}
for tag in ("fused", "q", "base"):
    same = [got[f"{tag}-{i}"]["output_token_ids"] == phi_refs[tag][f"{tag}-{i}"]["output_token_ids"] for i in range(6)]
    c.check(all(same), f"phi3 {tag}: {same} (adapter output vs its merged model)")
for tag in ("fused", "q"):
    changed = sum(phi_refs[tag][f"{tag}-{i}"]["output_token_ids"] != phi_refs["base"][f"{tag}-{i}"]["output_token_ids"]
                  for i in range(6))
    c.check(changed >= 4, f"phi3 adapter {tag} changes only {changed} of 6 outputs")

# Another base model named: a warning, and the run goes on.
other_base = os.path.join(work, "other-base")
write_peft(other_base, P_PAIRS, dict(P_CONFIG, base_model_name_or_path="org/another-model"))
proc = run(["run", mixed, "-o", os.path.join(work, "warned.jsonl"), "--model", BASE, "--device", "cpu", "--threads", "2",
            "--lora-modules", f"P={other_base}", "--lora-modules", f"G={G_FILE}"])
c.check("warning" in proc.stderr and "'P'" in proc.stderr and "org/another-model" in proc.stderr,
        f"no warning about the base model: {proc.stderr[-400:]!r}")

c.done()
