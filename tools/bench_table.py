#!/usr/bin/env python3
"""Markdown table rows from `cbatch bench --json` files, in the columns of docs/benchmarks/README.md:
workload [file's stage], mode, output tok/s, roofline fraction, GPU idle, TTFT p50/p99, e2e p50/p99 (seconds),
preemptions; one row per mode of each file, and the continuous/static ratio where a file has both.

    tools/bench_table.py gpu-out/bench-1b.json gpu-out/bench-8b-short.json
"""
import json
import os
import sys


def workload(d):
    w = d["workload"]
    lens = [f"{x[0]}" if x[0] == x[1] else f"{x[0]}:{x[1]}" for x in (w["input_len"], w["output_len"])]
    if w.get("dataset", "random") != "random" and "mean_input_len" in w:  # sharegpt: the lengths it drew
        dataset = "sharegpt" if w["dataset"].startswith("sharegpt:") else w["dataset"]
        lens = [f"{dataset} mean {w['mean_input_len']:.0f}", f"mean {w['mean_output_len']:.0f}"]
    label = f"{os.path.basename(d['model'])}, {w['num_prompts']} req, in {lens[0]}, out {lens[1]}"
    if w.get("temperature", 0) > 0:  # sampled workloads (bench --temperature / --top-p / --top-k)
        label += f", T {w['temperature']:g}, top-p {w.get('top_p', 1):g}, top-k {w.get('top_k', -1)}"
    return label


def fmt(value, pattern):
    return "—" if value is None else pattern.format(value)


def stage(path):
    """The gpu_check.sh stage a file came from (bench-1b-stream.json: 1b-stream), which names the variant."""
    name = os.path.basename(path)
    name = name[len("bench-"):] if name.startswith("bench-") else name
    return name[:-len(".json")] if name.endswith(".json") else name


def rows(d, path):
    out = []
    for r in d["results"]:
        out.append("| {} [{}] | {} | {} | {} | {} | {} / {} | {} / {} | {} |".format(
            workload(d), stage(path), r["mode"], fmt(r.get("output_tokens_per_s"), "{:,.0f}"),
            fmt(r.get("roofline_fraction"), "{:.3f}"), fmt(r.get("gpu_idle_fraction"), "{:.1%}"),
            fmt(r.get("ttft_ms_p50", 0) / 1000, "{:.1f}"), fmt(r.get("ttft_ms_p99", 0) / 1000, "{:.1f}"),
            fmt(r.get("e2e_ms_p50", 0) / 1000, "{:.1f}"), fmt(r.get("e2e_ms_p99", 0) / 1000, "{:.1f}"),
            r.get("preemptions", 0)))
    by_mode = {r["mode"]: r["output_tokens_per_s"] for r in d["results"]}
    if "continuous" in by_mode and by_mode.get("static"):
        out.append(f"<!-- continuous / static: {by_mode['continuous'] / by_mode['static']:.2f}x -->")
    return out


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print("| workload | mode | output tok/s | roofline | gpu idle | TTFT p50 / p99 (s) | e2e p50 / p99 (s) | preempt |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            print(f"bench_table: {path}: {e}", file=sys.stderr)
            return 1
        print("\n".join(rows(d, path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
