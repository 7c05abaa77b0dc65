"""logprobs and prompt_logprobs on the CUDA backend (skipped without a GPU): with --dtype fp32 on
tiny-spm every entry equals the CPU backend's within 1e-4 and the top ids agree (ranks whose values
are within 1e-4 may swap), greedy rows (device argmax), penalized and sampled rows drawn on the device
(--cuda-kernel sampling=device: logprobs from the logits before its in-place penalties), prompts in chunks of 16
rows and in one chunk, and max_tokens 0."""
import os
import random
import subprocess

from common import BIN, EXACT, Checks, cuda_device, need_cuda_device, read_jsonl, tiny_spm_gguf, tmpdir, write_jsonl

need_cuda_device()
c = Checks()
work = tmpdir()
MODEL = ["--model", tiny_spm_gguf(), "--quiet"]
rng = random.Random(3)
rows = []
for i, extra in enumerate([{"temperature": 0}, {"temperature": 0, "repetition_penalty": 1.4},
                           {"temperature": 0.9, "seed": 5, "frequency_penalty": 0.4}, {"max_tokens": 0},
                           {"temperature": 1.0, "top_k": 30, "seed": 9}]):
    ids = [1] + [rng.randrange(3, 512) for _ in range(rng.randrange(5, 90))]
    rows.append({"id": i, "prompt_token_ids": ids, "max_tokens": 10, "ignore_eos": True, "logprobs": 5,
                 "prompt_logprobs": 3, **extra})
prompts = os.path.join(work, "p.jsonl")
write_jsonl(prompts, rows)


def results(extra):
    out = os.path.join(work, "out.jsonl")
    proc = subprocess.run([BIN, "run", prompts, "-o", out] + MODEL + extra, capture_output=True, text=True)
    c.check(proc.returncode == 0, f"cbatch {extra} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return {r["id"]: r for r in read_jsonl(out)}


def same_entries(where, got, want):
    c.check(len(got) == len(want), f"{where}: {len(got)} entries, CPU {len(want)}")
    for n, (g, w) in enumerate(zip(got, want)):
        if g is None or w is None:
            c.check(g is None and w is None, f"{where} {n}: {g} vs {w}")
            continue
        c.check(g["token_id"] == w["token_id"] and abs(g["logprob"] - w["logprob"]) <= 1e-4, f"{where} {n}: {g} vs CPU {w}")
        for r, (gt, wt) in enumerate(zip(g["top"], w["top"])):
            c.check(abs(gt["logprob"] - wt["logprob"]) <= 1e-4 and (gt["token_id"] == wt["token_id"] or
                    abs(gt["logprob"] - g["top"][min(r + 1, len(g["top"]) - 1)]["logprob"]) <= 1e-4 or
                    abs(gt["logprob"] - g["top"][max(r - 1, 0)]["logprob"]) <= 1e-4), f"{where} {n} top {r}: {gt} vs CPU {wt}")


cpu = results(["--device", "cpu"] + EXACT)
for name, extra, sampling in [("cuda host sampling", [], "sampling=host"),
                              ("cuda budget 16", ["--max-num-batched-tokens", "16"], "sampling=host"),
                              ("cuda device sampling", [], "sampling=device")]:
    gpu = results(cuda_device(sampling) + ["--dtype", "fp32"] + extra)
    for r in rows:
        g, w = gpu[r["id"]], cpu[r["id"]]
        same_entries(f"{name} request {r['id']} prompt", g["prompt_logprobs"], w["prompt_logprobs"])
        c.check(len(g["logprobs"]) == len(g["output_token_ids"]), f"{name} request {r['id']}: one entry a token")
        if r.get("temperature", 1.0) == 0:
            c.check(g["output_token_ids"] == w["output_token_ids"], f"{name} request {r['id']}: other greedy tokens")
        if g["output_token_ids"] == w["output_token_ids"]:  # a sampled row may draw others from fp32 logits
            same_entries(f"{name} request {r['id']} output", g["logprobs"], w["logprobs"])
        else:
            print(f"{name} request {r['id']}: sampled other tokens than the CPU; their values not compared")
c.done()
