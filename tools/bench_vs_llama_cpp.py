#!/usr/bin/env python3
"""CPU throughput of cbatch and llama.cpp side by side, on the same GGUF files, in one run.

For each GGUF and each number of sequences N: `cbatch bench` (random dataset, N prompts of --input-len
tokens, --output-len tokens each forced with ignore_eos, --max-num-seqs N, continuous mode) and llama.cpp's
`llama-batched-bench` (-npl N: N prompts of the same length in one batched prefill, then --output-len steps
of N tokens; it samples nothing, every step feeds random tokens). The two run one after the other for each
row (--repeat R times, the fastest of each engine kept), the first of the pair alternating, so a busy
machine weighs on both; each is a fresh process with its own warm-up. Both are measured the same way:
total tok/s = N * (prompt + output) / wall time of the generation (model load excluded), output tok/s =
N * output / the same wall time. Prefill and decode tok/s apart: llama.cpp's own (its prompt batch; its
output-len steps of N tokens), cbatch's from its slowest time to first token (its first step prefills every
prompt and samples the first tokens when N * input fits --max-num-batched-tokens, 2048 by default) and the
rest of the wall time (output-len - 1 steps of N tokens). A hybrid model's row adds cbatch's state bytes per
sequence (state_slot_bytes). --llama-cpp-args passes more options to llama-batched-bench (e.g. --no-repack
where its AMX kernels stop on an illegal instruction: a CPU that lists AMX without the kernel allowing it).
Each run records the 1-minute load average when it started (on a shared
machine, other work slows llama.cpp, whose threads spin at their barriers, more than cbatch).

    tools/bench_vs_llama_cpp.py --cbatch build/cbatch A.gguf B.gguf [--seqs 1,16,64] [--threads 2] \\
        [--repeat R] [--llama-cpp build-llama-cpp] [--json OUT.json] [--agreement [--agreement-only]]

--agreement adds, per model, the greedy agreement of cbatch's fast CPU path (8-bit activations, the
default) with `--cpu-precision exact` (fp32): 8 prompts x 32 tokens, the share of tokens before each
request's first difference. Outputs do not depend on the batch, so one figure serves every row of a model.
--agreement-only measures that and no speed.

--llama-cpp is the folder tools/llama_cpp/build.sh builds into (it runs the script, which does nothing
when the binaries exist). The files of the CPU table (docs/benchmarks/README.md): SmolLM2-135M-Instruct
Q4_1, Gemma 3 270M Q4_K_M, and random-weight models made by tools/make_random_gguf.py and llama.cpp's
llama-quantize (its docstring has the commands): the Qwen3-30B-A3B-shaped MoE in Q8_0 and Q4_K_M, and the
dense Llama-shaped dense-1b-Q8_0.gguf (991 MB) and dense-1.7b-Q4_K_M.gguf (1.02 GB)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.abspath(__file__))


def llama_cpp_bin(folder):
    out = subprocess.run([os.path.join(TOOLS, "llama_cpp", "build.sh"), folder], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return out.strip().splitlines()[-1]


def measure(num_seqs, prompt_tokens, output_tokens, wall_s, prefill_tok_s, decode_tok_s):
    return {"num_seqs": num_seqs, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
            "wall_s": wall_s, "total_tok_s": (prompt_tokens + output_tokens) / wall_s,
            "output_tok_s": output_tokens / wall_s, "prefill_tok_s": prefill_tok_s, "decode_tok_s": decode_tok_s}


def run_cbatch(args, model, num_seqs):
    with tempfile.TemporaryDirectory() as work:
        report_path = os.path.join(work, "bench.json")
        subprocess.run([args.cbatch, "bench", "--model", model, "--device", "cpu", "--threads", str(args.threads),
                        "--dataset", "random", "--num-prompts", str(num_seqs), "--input-len", str(args.input_len),
                        "--output-len", str(args.output_len), "--max-num-seqs", str(num_seqs),
                        "--modes", "continuous", "--quiet", "--json", report_path],
                       check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(report_path))["results"][0]
    # Every prompt is admitted in the first step when N * input-len fits the token budget (2048 by default), so
    # the slowest first token is the prefill's time; the rest of the run is the N * (output-len - 1) decodes.
    prefill_s = r["ttft_ms_p99"] / 1000.0
    decodes = num_seqs * (args.output_len - 1)
    m = measure(num_seqs, r["prompt_tokens"], r["output_tokens"], r["wall_s"], r["prompt_tokens"] / prefill_s,
                decodes / (r["wall_s"] - prefill_s) if decodes else 0.0)
    if "state_slot_bytes" in r:  # a hybrid model: one sequence's recurrent state
        m["state_slot_bytes"] = r["state_slot_bytes"]
    return m


def run_llama_cpp(args, model, num_seqs):
    ctx = num_seqs * (args.input_len + args.output_len)  # each sequence's KV cell range is ctx / num_seqs
    proc = subprocess.run([os.path.join(args.llama_cpp_bin, "llama-batched-bench"), "-m", model,
                           "-c", str(ctx), "-t", str(args.threads), "-npp", str(args.input_len),
                           "-ntg", str(args.output_len), "-npl", str(num_seqs), "--output-format", "jsonl"]
                          + args.llama_cpp_args.split(),
                          check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(rows) != 1:
        sys.exit(f"error: llama-batched-bench on {model} with {num_seqs} sequences printed {len(rows)} result rows")
    r = rows[0]
    return measure(num_seqs, r["pl"] * r["pp"], r["pl"] * r["tg"], r["t"], r["speed_pp"], r["speed_tg"])


AGREEMENT_PROMPTS = ["The three primary colors are", "Paris is the capital of", "def add(a, b):\n    return",
                     "Once upon a time", "The quick brown fox", "In 1969, astronauts", "Water boils at",
                     "My favourite book is"]


def agreement(args, model):
    """cbatch's fast-path greedy tokens against the exact path's: {"agreed", "total", "identical", "requests"}."""
    with tempfile.TemporaryDirectory() as work:
        prompts = os.path.join(work, "prompts.jsonl")
        with open(prompts, "w") as f:
            for i, text in enumerate(AGREEMENT_PROMPTS):
                f.write(json.dumps({"id": str(i), "prompt": text, "max_tokens": 32, "temperature": 0,
                                    "ignore_eos": True}) + "\n")
        got = {}
        for precision in ("fast", "exact"):
            out = os.path.join(work, f"{precision}.jsonl")
            subprocess.run([args.cbatch, "run", prompts, "-o", out, "--model", model, "--device", "cpu", "--quiet",
                            "--threads", str(args.threads), "--cpu-precision", precision], check=True)
            with open(out) as f:
                got[precision] = {r["id"]: r["output_token_ids"] for r in map(json.loads, f)}
    agreed = total = identical = 0
    for key, exact in got["exact"].items():
        fast = got["fast"][key]
        prefix = next((j for j, (x, y) in enumerate(zip(fast, exact)) if x != y), min(len(fast), len(exact)))
        agreed, total, identical = agreed + prefix, total + len(exact), identical + (fast == exact)
    return {"agreed": agreed, "total": total, "identical": identical, "requests": len(got["exact"])}


def agreement_text(a):
    return f"{100.0 * a['agreed'] / a['total']:.0f}% ({a['identical']}/{a['requests']})" if a else "-"


def print_table(rows):
    print("| model | seqs | cbatch total tok/s | llama.cpp total tok/s | ratio | cbatch output tok/s "
          "| llama.cpp output tok/s | prefill tok/s (cbatch / llama.cpp) | decode tok/s (cbatch / llama.cpp) "
          "| cbatch state / seq | load (cbatch / llama.cpp) | fast = exact, greedy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        c, l = r["cbatch"], r["llama_cpp"]
        state = f"{c['state_slot_bytes'] / 1e6:.2f} MB" if "state_slot_bytes" in c else "-"
        print(f"| {r['model']} | {r['num_seqs']} | {c['total_tok_s']:.1f} | {l['total_tok_s']:.1f} "
              f"| {r['ratio']:.2f}x | {c['output_tok_s']:.1f} | {l['output_tok_s']:.1f} "
              f"| {c['prefill_tok_s']:.1f} / {l['prefill_tok_s']:.1f} "
              f"| {c['decode_tok_s']:.1f} / {l['decode_tok_s']:.1f} "
              f"| {state} | {c['load_before']:.1f} / {l['load_before']:.1f} | {agreement_text(r.get('agreement'))} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="GGUF files")
    ap.add_argument("--cbatch", default=os.environ.get("CBATCH_BIN", "build/cbatch"), help="the cbatch binary")
    ap.add_argument("--llama-cpp", default="build-llama-cpp", help="llama.cpp build folder (tools/llama_cpp/build.sh)")
    ap.add_argument("--llama-cpp-args", default="", help="more options for llama-batched-bench, space-separated")
    ap.add_argument("--seqs", default="1,16,64", help="comma-separated sequence counts")
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each engine per row, the fastest kept")
    ap.add_argument("--json", help="write the rows as JSON")
    ap.add_argument("--agreement", action="store_true", help="add each model's fast-vs-exact greedy agreement")
    ap.add_argument("--agreement-only", action="store_true", help="measure only that agreement, no speed")
    args = ap.parse_args()
    seqs = [int(s) for s in args.seqs.split(",")]
    if args.repeat < 1 or min(seqs) < 1:
        sys.exit(f"error: --repeat {args.repeat} and --seqs {args.seqs} must be at least 1")
    for path in args.models + [args.cbatch]:
        if not os.path.exists(path):
            sys.exit(f"error: {path}: no such file")
    if args.agreement_only:
        for model in args.models:
            print(f"{os.path.basename(model)}: fast = exact, greedy: {agreement_text(agreement(args, model))} "
                  "(tokens before the first difference; requests identical)")
        return
    args.llama_cpp_bin = llama_cpp_bin(args.llama_cpp)
    rows = []
    for model in args.models:
        model_agreement = agreement(args, model) if args.agreement else None
        for num_seqs in seqs:
            engines = [("cbatch", run_cbatch), ("llama_cpp", run_llama_cpp)]
            if len(rows) % 2:
                engines.reverse()
            row = {"model": os.path.basename(model), "num_seqs": num_seqs}
            runs = {name: [] for name, _ in engines}
            for _ in range(args.repeat):
                for name, run in engines:
                    load = os.getloadavg()[0]  # the machine's other work when the run starts
                    runs[name].append(dict(run(args, model, num_seqs), load_before=load))
            for name, samples in runs.items():  # other work only slows a run down: keep the fastest
                row[name] = dict(max(samples, key=lambda m: m["total_tok_s"]), runs=samples)
            row["ratio"] = row["cbatch"]["total_tok_s"] / row["llama_cpp"]["total_tok_s"]
            if model_agreement:
                row["agreement"] = model_agreement
            rows.append(row)
            print(f"{row['model']} {num_seqs} seqs: cbatch {row['cbatch']['total_tok_s']:.1f}, llama.cpp "
                  f"{row['llama_cpp']['total_tok_s']:.1f} total tok/s ({row['ratio']:.2f}x)", file=sys.stderr)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"input_len": args.input_len, "output_len": args.output_len, "threads": args.threads,
                       "repeat": args.repeat, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
