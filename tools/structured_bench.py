"""Structured-output throughput on the CPU: 64 requests of the JSON schema suite of
tests/e2e/test_structured.py (schemas in turn, t=1.0, 64 tokens at most) against the same prompts
unconstrained, and against the same prompts unconstrained with each request's output length fixed to
its constrained one (ignore_eos: the same tokens to compute, so only the constraint's cost differs);
prints output tok/s, the ratios and the mask time per constrained row. With --repeat R the three runs
alternate R times and the best of each counts (a shared machine slows some runs, never speeds one).
Usage: python3 tools/structured_bench.py BUILD_DIR MODEL [--device cpu|cuda] [--threads N] [--requests N] [--repeat R]
[--cuda-kernel NAME=VALUE ...] (MODEL may be dummy:CONFIG.json; on CUDA the constrained rows are drawn on the GPU,
or with --cuda-kernel sampling=host by the host's sampler; each --cuda-kernel goes to cbatch)."""
import argparse
import ast
import json
import os
import subprocess
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def schemas():
    src = open(os.path.join(here, "..", "tests", "e2e", "test_structured.py")).read()
    start = src.index("SCHEMAS = [")
    return ast.literal_eval(src[start + len("SCHEMAS = "):src.index("\n]", start) + 2])


def run(build, model, device, threads, rows, work, name):
    """device: the device flags (--device, --cuda-kernel) of every run."""
    prompts, out, summary = (os.path.join(work, f"{name}.{ext}") for ext in ("jsonl", "out.jsonl", "summary.json"))
    with open(prompts, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    subprocess.run([os.path.join(build, "cbatch"), "run", prompts, "-o", out, "--model", model] + device +
                   ["--threads", str(threads), "--quiet", "--summary", summary], check=True)
    lengths = {r["id"]: r.get("completion_tokens", 0) for r in map(json.loads, open(out))}
    return json.load(open(summary)), lengths


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("model")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--cuda-kernel", action="append", default=[], help="NAME=VALUE, passed to cbatch (repeatable)")
    a = p.parse_args()
    device = ["--device", a.device] + [x for k in a.cuda_kernel for x in ("--cuda-kernel", k)]
    suite = schemas()
    base = [{"id": f"r{i}", "prompt": "The answer as JSON:", "max_tokens": 64, "temperature": 1.0, "seed": i}
            for i in range(a.requests)]
    constrained = [dict(r, response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": suite[i % len(suite)]}})
                   for i, r in enumerate(base)]
    best = lambda old, new: new if old is None or new[0]["wall_s"] < old[0]["wall_s"] else old
    plain = masked = same_lengths = None
    with tempfile.TemporaryDirectory() as work:
        for _ in range(a.repeat):
            plain = best(plain, run(a.build, a.model, device, a.threads, base, work, "plain"))
            masked = best(masked, run(a.build, a.model, device, a.threads, constrained, work, "constrained"))
            same = [dict(r, max_tokens=max(1, masked[1][r["id"]]), ignore_eos=True) for r in base]
            same_lengths = best(same_lengths, run(a.build, a.model, device, a.threads, same, work, "same_lengths"))
    plain, masked, same_lengths = plain[0], masked[0], same_lengths[0]
    tps = {k: s["output_tokens_per_s"] for k, s in (("plain", plain), ("constrained", masked), ("same_lengths", same_lengths))}
    print(json.dumps({"output_tok_s": tps, "ratio": round(tps["constrained"] / tps["plain"], 3),
                      "ratio_same_lengths": round(tps["constrained"] / tps["same_lengths"], 3),
                      "constrained_rows": masked["constrained_rows"], "mask_s": masked["mask_s"],
                      "mask_ms_per_row": round(1000 * masked["mask_s"] / max(1, masked["constrained_rows"]), 3),
                      "wall_s": {"plain": plain["wall_s"], "constrained": masked["wall_s"], "same_lengths": same_lengths["wall_s"]}},
                     indent=1))


if __name__ == "__main__":
    main()
