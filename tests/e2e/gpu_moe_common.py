"""Helpers of the CUDA mixture-of-experts tests (test_gpu_moe.py, test_gpu_gpt_oss.py): cbatch's greedy
tokens of a model with BASE's options and a test's own, and the experts touched per step of a
one-sequence-at-a-time run on a device."""
import os

from common import cuda_device, read_jsonl, run

BASE = {"--mode": "continuous", "--max-num-batched-tokens": "512", "--max-num-seqs": "8"}


def flags(extra):
    """BASE with the options of extra (flag, value pairs) in place of its own: cbatch takes each flag once,
    except --cuda-kernel (once per switch), which is kept as often as extra gives it."""
    pairs = list(zip(extra[::2], extra[1::2]))
    options = dict(BASE, **{k: v for k, v in pairs if k != "--cuda-kernel"})
    if options.get("--device") == "cpu":
        options.setdefault("--cpu-precision", "exact")  # the fp32 products CUDA's fp32 runs compare with
    kernels = [x for k, v in pairs if k == "--cuda-kernel" for x in (k, v)]
    return [x for k, v in options.items() for x in (k, v)] + kernels + ["--quiet"]


def outputs(work, model, prompts, extra):
    """The output_token_ids of each request of prompts, by id."""
    out = os.path.join(work, "out.jsonl")
    run(["run", prompts, "-o", out, "--model", model] + flags(extra))
    return [r.get("output_token_ids") for r in sorted(read_jsonl(out), key=lambda r: r["id"])]


def touched_per_step(work, model, prompts, device):
    """experts_touched of each step of the trace, one sequence at a time (fp32 on CUDA)."""
    trace = os.path.join(work, f"trace-{device}.jsonl")
    on = cuda_device() + ["--dtype", "fp32"] if device == "cuda" else ["--device", device]
    outputs(work, model, prompts, on + ["--mode", "sequential", "--trace", trace])
    return [s.get("experts_touched") for s in read_jsonl(trace)]
