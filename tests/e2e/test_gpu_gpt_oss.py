"""gpt-oss on the CUDA backend (skipped without a GPU), on the tiny seeded gpt-oss of tiny_models.py (attention
sinks, q/k/v/o biases, window 8 on layers 0 and 2, YaRN, router and expert biases, top-k-then-softmax, the
clamped SwiGLU) as test_gpt_oss.py writes it, on the prompts it checks the float64 reference on (their router
gaps are clear, and dropping any of those features changes the reference's greedy tokens):
- with --dtype fp32, the greedy tokens of the bf16 HF directory, the MXFP4 directory and the GGUF on CUDA
  equal the CPU backend's (which test_gpt_oss.py checks against the reference); bf16's leading agreement
  with them is printed;
- per step, the trace's experts_touched on CUDA equals the CPU's (one sequence at a time);
- the outputs are the same across --mode continuous/static/sequential and token budgets on CUDA (fp32), and
  with the decode rows through the tile kernel (--cuda-kernel decode=paged); in bf16, the prefill chunks
  through the CUDA-core kernel (--cuda-kernel prefill=off) and the decode rows through the stream kernel
  agree with the CPU about as far as the default bf16 run does.
The kernels' sink arithmetic itself is checked against a reference in test_cuda (and in the emulator)."""
import os
import random

from common import Checks, cuda_device, leading_agreement, need_cuda_device, need_modules, tmpdir, write_jsonl

need_cuda_device()
need_modules("numpy", "gguf")
import tiny_models  # noqa: E402
from gpu_moe_common import outputs, touched_per_step  # noqa: E402

NUM_TOKENS = 12
PROMPT_SEED = 6  # test_gpt_oss.py's: prompts longer than the window, clear router gaps
PROMPT_LENGTHS = (12, 21, 30, 40)  # test_moe.py's
c = Checks()
work = tmpdir()


def write_models():
    rng = random.Random(PROMPT_SEED)
    rows = [{"id": i, "prompt_token_ids": [rng.randrange(3, 256) for _ in range(n)], "max_tokens": NUM_TOKENS,
             "temperature": 0, "ignore_eos": True} for i, n in enumerate(PROMPT_LENGTHS)]
    prompts = os.path.join(work, "gpt-oss-prompts.jsonl")
    write_jsonl(prompts, rows)
    _, hf_dir, mxfp4_dir, gguf = tiny_models.write_gpt_oss(work)
    return prompts, [hf_dir, mxfp4_dir, gguf]


def main():
    prompts, models = write_models()
    fp32 = cuda_device() + ["--dtype", "fp32"]
    for model in models:
        label = f"gpt-oss {os.path.basename(model)}"
        cpu = outputs(work, model, prompts, ["--device", "cpu"])
        gpu32 = outputs(work, model, prompts, fp32)
        for i, (a, b) in enumerate(zip(gpu32, cpu)):
            c.check(a == b, f"{label} fp32 prompt {i}: CUDA agrees with CPU for {leading_agreement(a, b)}/{len(b)}"
                            f"\n  cuda {a}\n  cpu  {b}")
        gpu16 = outputs(work, model, prompts, cuda_device() + ["--dtype", "bf16"])
        print(f"{label} bf16 leading tokens equal to CPU fp32 per prompt:",
              [leading_agreement(a, b) for a, b in zip(gpu16, cpu)], f"of {NUM_TOKENS}")
        if model != models[0]:
            continue
        for extra in (["--mode", "static"], ["--mode", "sequential"], ["--max-num-batched-tokens", "16"]):
            c.check(outputs(work, model, prompts, fp32 + extra) == gpu32, f"{label}: CUDA outputs change with {extra}")
        tile = outputs(work, model, prompts, cuda_device("decode=paged") + ["--dtype", "fp32"])
        c.check(tile == cpu, f"{label}: fp32 with the decode rows in the tile kernel differs from the CPU:\n"
                             f"  cuda {tile}\n  cpu  {cpu}")
        bf16_default = sum(leading_agreement(a, b) for a, b in zip(gpu16, cpu))
        for kernel in ("prefill=off", "decode=stream"):
            got = outputs(work, model, prompts, cuda_device(kernel) + ["--dtype", "bf16"])
            agree = [leading_agreement(a, b) for a, b in zip(got, cpu)]
            print(f"{label} bf16 with --cuda-kernel {kernel}: leading tokens equal to CPU fp32 per prompt:", agree)
            c.check(sum(agree) >= bf16_default - len(cpu),
                    f"{label}: bf16 with --cuda-kernel {kernel} agrees with the CPU on fewer tokens ({agree}) than "
                    "the default")
    gpu_touched = touched_per_step(work, models[0], prompts, "cuda")
    cpu_touched = touched_per_step(work, models[0], prompts, "cpu")
    c.check(gpu_touched == cpu_touched and all(t is not None and t > 0 for t in gpu_touched),
            f"gpt-oss: experts_touched per step differs\n  cuda {gpu_touched}\n  cpu  {cpu_touched}")
    c.done()


main()
