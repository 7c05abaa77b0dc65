#!/usr/bin/env python3
"""Fits the location parameters of the synthetic ShareGPT workload (engine/bench/sharegpt_synthetic.cpp).

Prompt and output lengths are round(exp(mu + sigma * z)) with z standard normal, drawn as pairs and redrawn
while vLLM's ShareGPT filter drops the pair (either < 4, prompt > 1024, prompt + output > 2048). The sigmas
are chosen (a long tail; not a published fit); each mu is moved until the mean length *after* the filter
equals the target: 229.7 prompt and 203.1 output tokens, the 1,000-prompt ShareGPT sample of Llama-3.1-8B-
Instruct in vLLM pull request 18566 (229,711 input and 203,068 generated tokens). Prints mu and the filtered
distribution's mean, p50 and p90, which the unit test compares 10,000 draws of the C++ sampler against.
Usage: tools/fit_sharegpt_synthetic.py [--draws N]"""
import argparse

import numpy as np

TARGET_INPUT, TARGET_OUTPUT = 229.7, 203.1
SIGMA_INPUT, SIGMA_OUTPUT = 1.4, 1.0


def filtered(mu_in, mu_out, z_in, z_out):
    p = np.maximum(1, np.rint(np.exp(mu_in + SIGMA_INPUT * z_in)))
    o = np.maximum(1, np.rint(np.exp(mu_out + SIGMA_OUTPUT * z_out)))
    keep = (p >= 4) & (o >= 4) & (p <= 1024) & (p + o <= 2048)
    return p[keep], o[keep]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=20_000_000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    z_in, z_out = rng.standard_normal(args.draws), rng.standard_normal(args.draws)
    mu_in, mu_out = np.log(TARGET_INPUT), np.log(TARGET_OUTPUT)
    for _ in range(40):
        p, o = filtered(mu_in, mu_out, z_in, z_out)
        mu_in += np.log(TARGET_INPUT / p.mean())
        mu_out += np.log(TARGET_OUTPUT / o.mean())
    p, o = filtered(mu_in, mu_out, z_in, z_out)
    print(f"mu_input {mu_in:.5f} sigma_input {SIGMA_INPUT}  mu_output {mu_out:.5f} sigma_output {SIGMA_OUTPUT}")
    print(f"kept {len(p) / args.draws:.4f} of the pairs")
    for name, x in (("input", p), ("output", o)):
        print(f"{name}: mean {x.mean():.2f} p50 {np.percentile(x, 50):.1f} p90 {np.percentile(x, 90):.1f}"
              f" p99 {np.percentile(x, 99):.1f}")


if __name__ == "__main__":
    main()
