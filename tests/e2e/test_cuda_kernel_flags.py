"""--cuda-kernel NAME=VALUE and --cuda-profile, the CUDA backend's kernel choices on the command line: a
name or value cbatch does not have, a missing '=' or a name given twice is exit 1 with a message naming
the flag and the values (in every build, with or without a GPU); a run on the CPU refuses them (--device
cpu by name; --device auto without a GPU, or a build without CUDA, saying so), as --cpu-precision is
refused on CUDA; run and bench both take them. On a GPU each value runs every request of a small file,
and --cuda-profile prints the phases' device time."""
import os
import re

from common import Checks, read_jsonl, run, tiny_spm_gguf, tmpdir, write_jsonl

GGUF = ["--model", tiny_spm_gguf()]
c = Checks()
work = tmpdir()
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, [{"id": i, "prompt": p, "max_tokens": 6, "temperature": 0}
                      for i, p in enumerate(["I dreamed of", "The robot", "Once upon a time"])])
out = os.path.join(work, "out.jsonl")
BENCH = ["bench", "--num-prompts", "2", "--input-len", "4", "--output-len", "2", "--modes", "continuous",
         "--no-warmup", "--quiet"]


def refused(args, needles, command=None):
    proc = run((command or ["run", prompts, "-o", out, "--quiet"]) + GGUF + args, check=False)
    c.check(proc.returncode == 1, f"{args}: exit {proc.returncode}, expected 1: {proc.stderr.strip()[-300:]}")
    for needle in needles:
        c.check(needle in proc.stderr, f"{args}: stderr does not name {needle!r}: {proc.stderr.strip()[-300:]}")


# Spellings refused in any build, before the device is looked at.
for value, needles in [
    ("decode=tensor-cores", ["--cuda-kernel decode=tensor-cores", "stream, tensor-cores-16, cuda-cores, paged or 0"]),
    ("decode=Stream", ["decode=Stream", "decode takes"]),
    ("prefill=0", ["prefill=0", "prefill takes on or off"]),
    ("sampling=gpu", ["sampling=gpu", "sampling takes device or host"]),
    ("moe-gemm=grouped-batched", ["moe-gemm takes grouped or loop"]),
    ("moe-experts=mxfp4", ["moe-experts takes blocks or dequant"]),
    ("deltanet=chunk", ["deltanet=chunk", "deltanet takes chunked or recurrent"]),
    ("mamba-scan=ssd", ["mamba-scan=ssd", "mamba-scan takes chunked or recurrent"]),
    ("weights=bf16", ["--cuda-kernel weights=bf16", "weights takes blocks or dequant"]),
    ("attention=paged", ["attention is not a CUDA kernel switch",
                         "decode, prefill, sampling, moe-gemm, moe-experts, deltanet, mamba-scan or weights"]),
    ("decode", ["--cuda-kernel decode: expected NAME=VALUE"]),
]:
    refused(["--cuda-kernel", value], needles)
refused(["--cuda-kernel", "decode=stream", "--cuda-kernel", "decode=paged"], ["decode is given twice"])
refused(["--cuda-kernel", "weights=blocks", "--cuda-kernel", "weights=dequant"], ["weights is given twice"])
refused(["--cuda-kernel", "sampling=hostile"], ["sampling takes device or host"], BENCH)

# On the CPU they name a kernel the run does not have: refused, never ignored.
for args in (["--cuda-kernel", "decode=paged"], ["--cuda-profile"],
             ["--cuda-kernel", "prefill=off", "--cuda-kernel", "moe-gemm=loop"], ["--cuda-kernel", "weights=dequant"]):
    refused(["--device", "cpu"] + args, [args[1] if args[0] == "--cuda-kernel" else args[0],
                                         "applies to the CUDA backend only, not --device cpu"])
refused(["--device", "cpu", "--cuda-kernel", "sampling=host"], ["not --device cpu"], BENCH)
version = run(["--version"]).stdout
gpu = re.search(r"CUDA device 0: ", version)
if "CUDA support: no" in version:
    refused(["--cuda-kernel", "decode=stream"], ["--cuda-kernel decode=stream", "built without CUDA support"])
    refused(["--cuda-profile"], ["--cuda-profile", "built without CUDA support"])
elif not gpu:
    refused(["--cuda-kernel", "decode=stream"], ["--cuda-kernel decode=stream", "this run uses the CPU"])
    print("no CUDA device: the GPU runs did not run (%s)" % version.strip().replace("\n", "; "))
else:
    for value in ("decode=stream", "decode=tensor-cores-16", "decode=cuda-cores", "decode=paged", "decode=0",
                  "prefill=on", "prefill=off", "sampling=device", "sampling=host", "moe-gemm=grouped",
                  "moe-gemm=loop", "moe-experts=blocks", "moe-experts=dequant", "deltanet=chunked",
                  "deltanet=recurrent", "mamba-scan=chunked", "mamba-scan=recurrent", "weights=blocks",
                  "weights=dequant"):
        proc = run(["run", prompts, "-o", out, "--quiet", "--device", "cuda", "--cuda-kernel", value] + GGUF,
                   check=False)
        c.check(proc.returncode == 0, f"--cuda-kernel {value}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        if proc.returncode == 0:
            c.check(len(read_jsonl(out)) == 3, f"--cuda-kernel {value}: not every request answered")
    proc = run(BENCH + GGUF + ["--device", "cuda", "--cuda-profile", "--cuda-kernel", "decode=cuda-cores"], check=False)
    c.check(proc.returncode == 0 and "CUDA profile" in proc.stderr,
            f"bench --cuda-profile: exit {proc.returncode}, no profile on stderr: {proc.stderr.strip()[-300:]}")

for command in ("run", "bench"):
    text = run([command, "--help"]).stdout
    c.check("--cuda-kernel" in text and "--cuda-profile" in text, f"{command} --help lists no CUDA kernel flags")
c.done()
