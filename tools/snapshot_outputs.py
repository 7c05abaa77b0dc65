#!/usr/bin/env python3
"""What a cbatch binary computes on the CPU, as one JSON file, so that a refactoring can show it changed
nothing: `tools/snapshot_outputs.py --cbatch OLD/cbatch -o before.json`, the same with the new binary,
then `tools/snapshot_outputs.py --compare before.json after.json` (exit 1 and the first differences when
any output differs). The workloads: every family's seeded tiny model (tests/e2e/tiny_models.py; its
Hugging Face directory, its GGUF and one with Q4_0/Q4_1/Q8_0 FFNs), greedy with logprobs, sampled, n = 2, chunked;
SmolLM2-135M and Gemma 3 270M (`make test-data`) on examples/prompts and with logprobs, in both CPU
precisions and with the fp32 KV cache; all-MiniLM-L6-v2's embeddings. Token ids, logprobs and vectors are
kept exactly as printed (shortest round-trip floats), so "equal" means bit-identical."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
MODELS = os.path.join(ROOT, "models")


def run_cbatch(binary, rows, model_args, extra, work):
    prompts, out = os.path.join(work, "p.jsonl"), os.path.join(work, "o.jsonl")
    with open(prompts, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    proc = subprocess.run([binary, "run", prompts, "-o", out, "--quiet", "--device", "cpu", "--ordered"] + model_args +
                          list(extra), capture_output=True, text=True)
    if proc.returncode not in (0, 2):
        raise SystemExit(f"cbatch failed ({proc.returncode}): {' '.join(model_args + list(extra))}\n{proc.stderr[-2000:]}")
    with open(out) as f:
        lines = [json.loads(line) for line in f]
    for r in lines:  # timings differ run to run
        r.pop("metrics", None)
        if isinstance(r.get("response"), dict) and isinstance(r["response"].get("body"), dict):
            r["response"]["body"].pop("created", None)
    return lines


def generation_rows(vocab, seed):
    import random
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, vocab - 3) for _ in range(n)] for n in (5, 23, 41, 64)]
    rows = [{"id": f"g{i}", "prompt_token_ids": p, "max_tokens": 12, "temperature": 0, "ignore_eos": True,
             "logprobs": 3, "prompt_logprobs": 2} for i, p in enumerate(prompts)]
    rows += [{"id": f"s{i}", "prompt_token_ids": p, "max_tokens": 12, "temperature": 0.8, "top_p": 0.9, "seed": i,
              "ignore_eos": True, "repetition_penalty": 1.2} for i, p in enumerate(prompts)]
    rows.append({"id": "n2", "prompt_token_ids": prompts[2], "max_tokens": 6, "n": 2, "temperature": 1.0, "seed": 9,
                 "ignore_eos": True})
    return rows


def tiny_family_models(work):
    """(label, model args, vocab) of every family's tiny model in each format it is written in."""
    import gguf
    import tiny_models as tm
    out = []
    for name, spec in tm.MODELS.items():
        weights = tm.random_weights(name)
        hf_dir = os.path.join(work, name)
        tm.write_hf(hf_dir, name, weights)
        out.append((f"{name}/hf", ["--model", hf_dir], tm.VOCAB))
        if spec.get("gguf", True):
            path = hf_dir + ".gguf"
            tm.write_gguf(path, name, weights)
            out.append((f"{name}/gguf", ["--model", path], tm.VOCAB))
            if not spec.get("moe"):
                quant = hf_dir + "-q4.gguf"
                tm.write_gguf(quant, name, weights, ffn_qtype={"ffn_gate": gguf.GGMLQuantizationType.Q4_0,
                                                              "ffn_up": gguf.GGMLQuantizationType.Q4_1,
                                                              "ffn_down": gguf.GGMLQuantizationType.Q8_0})
                out.append((f"{name}/q4", ["--model", quant], tm.VOCAB))
    return out


def snapshot(binary):
    result = {}
    with tempfile.TemporaryDirectory(prefix="cbatch-snapshot-") as work:
        for label, model_args, vocab in tiny_family_models(work):
            rows = generation_rows(vocab, 7)
            result[label] = run_cbatch(binary, rows, model_args, [], work)
            result[label + "/chunked"] = run_cbatch(binary, rows, model_args,
                                                    ["--max-num-batched-tokens", "7", "--block-size", "4"], work)
        prompts_dir = os.path.join(ROOT, "examples", "prompts")
        examples = []
        for name in sorted(os.listdir(prompts_dir)):
            with open(os.path.join(prompts_dir, name)) as f:
                examples += [json.loads(line) for line in f if line.strip()]
        for real in ("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-Q4_K_M.gguf"):
            path = os.path.join(MODELS, real)
            if not os.path.exists(path):
                raise SystemExit(f"{path} is missing: run `make test-data`")
            for extra in ([], ["--cpu-precision", "exact"], ["--kv-cache-dtype", "float32"]):
                label = real + ("/" + "-".join(extra) if extra else "")
                result[label + "/examples"] = run_cbatch(binary, examples, ["--model", path], extra, work)
                result[label + "/logprobs"] = run_cbatch(binary, generation_rows(49152 if "SmolLM2" in real else 262144, 3),
                                                         ["--model", path], extra, work)
        minilm = os.path.join(MODELS, "all-MiniLM-L6-v2")
        sentences = ["The quick brown fox jumps over the lazy dog.", "A man is eating food.", "Café naïve résumé",
                     " ".join(["long"] * 300)]
        result["minilm"] = run_cbatch(binary, [{"id": i, "input": s} for i, s in enumerate(sentences)],
                                      ["--model", minilm], [], work)
    return result


def compare(a_path, b_path):
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    differences = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    lines = sum(len(v) for v in a.values())
    for k in differences[:10]:
        rows_a, rows_b = a.get(k) or [], b.get(k) or []
        first = next((i for i, (x, y) in enumerate(zip(rows_a, rows_b)) if x != y), min(len(rows_a), len(rows_b)))
        print(f"differs: {k}, first at line {first}")
    print(f"{len(a)} workloads, {lines} output lines: {len(differences)} workloads differ")
    return 1 if differences else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cbatch", help="the binary to snapshot")
    parser.add_argument("-o", "--output", help="the snapshot file to write")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two snapshot files")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.cbatch or not args.output:
        parser.error("give --cbatch and -o, or --compare")
    data = snapshot(args.cbatch)
    with open(args.output, "w") as f:
        json.dump(data, f)
    print(f"{len(data)} workloads, {sum(len(v) for v in data.values())} output lines -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
