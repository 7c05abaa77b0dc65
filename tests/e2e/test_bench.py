"""cbatch bench: every mode runs the same random workload, the table and the JSON carry the contract's
fields, continuous beats static on mixed lengths, --baseline/--tolerance turn a regression into a
non-zero exit, and --temperature/--top-p/--top-k make a sampled workload (same forced lengths)."""
import json
import os

from common import Checks, run, tiny_spm_gguf, tmpdir

MODEL = ["--model", tiny_spm_gguf(), "--device", "cpu", "--quiet"]
c = Checks()
work = tmpdir()
out = os.path.join(work, "bench.json")
proc = run(["bench", "--num-prompts", "48", "--input-len", "4:60", "--output-len", "4:60", "--max-num-seqs", "16",
            "--json", out] + MODEL)
c.check("out_tok/s" in proc.stdout and "continuous" in proc.stdout and "sequential" in proc.stdout, "bench table")
report = json.load(open(out))
c.check(report["device"] == "cpu", "device field")
c.check(report["workload"]["num_prompts"] == 48 and report["workload"]["input_len"] == [4, 60], "workload fields")
modes = {r["mode"]: r for r in report["results"]}
c.check(set(modes) == {"continuous", "static", "sequential"}, f"modes {set(modes)}")
fields = {"requests", "prompt_tokens", "output_tokens", "wall_s", "output_tokens_per_s", "total_tokens_per_s",
          "requests_per_s", "steps", "mean_budget_use", "padding_fraction", "preemptions", "ttft_ms_p50",
          "ttft_ms_p99", "e2e_ms_p50", "e2e_ms_p99"}
for name, r in modes.items():
    c.check(fields <= set(r), f"{name}: missing {fields - set(r)}")
    c.check(r["requests"] == 48, f"{name}: {r['requests']} requests")
tokens = {r["output_tokens"] for r in modes.values()}
c.check(len(tokens) == 1, f"modes generated different token counts {tokens}")
c.check(modes["static"]["padding_fraction"] > 0 and modes["continuous"]["padding_fraction"] == 0, "padding")
c.check(modes["continuous"]["steps"] < modes["static"]["steps"] < modes["sequential"]["steps"], "step counts")

# A sampled workload: the same forced output lengths, its sampling in the JSON; bad values refused.
sampled = os.path.join(work, "sampled.json")
run(["bench", "--num-prompts", "48", "--input-len", "4:60", "--output-len", "4:60", "--max-num-seqs", "16",
     "--modes", "continuous", "--temperature", "1.0", "--top-p", "0.9", "--top-k", "40", "--json", sampled] + MODEL)
report = json.load(open(sampled))
w = report["workload"]
c.check((w["temperature"], w["top_p"], w["top_k"]) == (1.0, 0.9, 40), f"sampling fields {w}")
c.check(report["results"][0]["output_tokens"] == modes["continuous"]["output_tokens"], "sampled output tokens")
for flag, value in [("--temperature", "-1"), ("--top-p", "0"), ("--top-k", "-2")]:
    proc = run(["bench", "--num-prompts", "2", flag, value] + MODEL, check=False)
    c.check(proc.returncode != 0 and flag in proc.stderr, f"{flag} {value}: exit {proc.returncode}")

# Regression gate: a baseline far above today's figures fails, one below passes.
# (Far apart: the gate run is short and its machine may be busy, so its figures vary several-fold.)
for factor, expect in [(100.0, 3), (0.001, 0)]:
    base = {"results": [{"mode": m, "output_tokens_per_s": r["output_tokens_per_s"] * factor} for m, r in modes.items()]}
    path = os.path.join(work, f"base-{factor}.json")
    json.dump(base, open(path, "w"))
    proc = run(["bench", "--num-prompts", "8", "--input-len", "4:8", "--output-len", "4:8", "--modes", "continuous",
                "--baseline", path, "--tolerance", "0.2"] + MODEL, check=False)
    c.check(proc.returncode == expect, f"baseline x{factor}: exit {proc.returncode}, expected {expect}")
    if expect:
        c.check("regression" in proc.stderr, "regression message")
c.done()
