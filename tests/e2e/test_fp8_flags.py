"""--quantization fp8 at the command line: the CPU backend and a build without CUDA refuse it with exit 1
(bad arguments, as the contract says) and a message naming the flag; on a GPU, --dtype fp32 is refused,
a model whose matrices are not multiples of 16 (tiny-spm's hidden size 172) is refused naming the
tensor (below compute capability 8.9: the GPU is refused), and a tiny dummy model runs with fp8 weights,
which the load line reports."""
import os
import re

from common import Checks, read_jsonl, run, tiny_dummy_model, tiny_spm_gguf, tmpdir, write_jsonl

GGUF = ["--model", tiny_spm_gguf()]
c = Checks()
work = tmpdir()
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, [{"id": i, "prompt": p, "max_tokens": 8, "temperature": 0}
                      for i, p in enumerate(["I dreamed of", "The robot", "Once upon a time"])])
out = os.path.join(work, "out.jsonl")


def refused(args, needles):
    proc = run(["run", prompts, "-o", out] + args, check=False)
    c.check(proc.returncode == 1, f"{args}: exit {proc.returncode}, expected 1")
    for needle in needles:
        c.check(needle in proc.stderr, f"{args}: stderr does not name {needle!r}: {proc.stderr.strip()[-300:]}")


refused(GGUF + ["--quantization", "fp8", "--device", "cpu"], ["--quantization fp8", "CUDA"])
version = run(["--version"]).stdout
gpu = re.search(r"CUDA device 0: .*\(sm_(\d+)\)", version)
if "CUDA support: no" in version:
    refused(GGUF + ["--quantization", "fp8"], ["--quantization fp8", "CUDA"])
    refused(GGUF + ["--quantization", "fp8", "--device", "cuda"], ["--device cuda", "without CUDA"])
elif gpu is None:
    print("no CUDA device: the GPU checks did not run (%s)" % version.strip().replace("\n", "; "))
    refused(GGUF + ["--quantization", "fp8"], ["--quantization fp8", "CUDA"])
else:
    cuda = ["--device", "cuda", "--quantization", "fp8"]
    refused(GGUF + cuda + ["--dtype", "fp32"], ["--dtype fp32"])
    if int(gpu.group(1)) < 89:
        refused(GGUF + cuda, ["compute capability 8.9"])
    else:
        refused(GGUF + cuda, ["'blk.0.ffn_gate.weight' has shape (172, 64)", "multiples of 16"])
        tiny = [a for a in tiny_dummy_model(work) if a not in ("--device", "cpu", "--quiet")]
        proc = run(["run", prompts, "-o", out] + tiny + cuda)
        c.check("fp8 weights" in proc.stderr, f"load line does not say fp8 weights: {proc.stderr.strip()[:300]}")
        rows = read_jsonl(out)
        c.check(len(rows) == 3 and all("error" not in r and r["output_token_ids"] for r in rows),
                f"fp8 outputs: {rows}")
c.done()
