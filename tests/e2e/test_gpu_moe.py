"""Mixtures of experts on the CUDA backend (skipped without a GPU), on the tiny seeded MoE models of
tiny_models.py (the prompts test_moe.py checks the float64 reference on, whose router gaps are clear):
- with --dtype fp32, the greedy tokens of the HF directory and of the GGUF on CUDA equal the CPU backend's;
  bf16's leading agreement with them is printed;
- per step, the trace's experts_touched on CUDA equals the CPU's (one sequence at a time, so the steps match);
- the outputs are the same across --mode continuous/static/sequential and token budgets on CUDA (fp32);
- OLMoE's q/k norms over the whole projections run as the other families do;
- Mixtral's GGUF with Q8_0, Q4_0, and Q4_K + Q6_K experts: the experts stay blocks on the device (the
  quantized expert GEMM) and its bf16 and fp16 tokens lead as --cuda-kernel moe-experts=dequant's do (the
  experts decoded to T at load, cuBLAS) for at least half of each request; the leading agreements are printed.
Arguments (--cuda-kernel NAME=VALUE, e.g. moe-gemm=loop) go to every CUDA run."""
import os
import random

from common import Checks, cuda_device, leading_agreement, need_cuda_device, need_modules, tmpdir, write_jsonl

need_cuda_device()
need_modules("numpy", "gguf")
import gguf  # noqa: E402
import tiny_models  # noqa: E402
from gpu_moe_common import outputs, touched_per_step  # noqa: E402

NUM_TOKENS = 12
PROMPT_LENGTHS = (12, 21, 30, 40)
PROMPT_SEEDS = {"qwen3-moe": 2, "qwen2-moe": 1, "mixtral": 1, "olmoe": 3}  # as test_moe.py's
c = Checks()
work = tmpdir()


def write_model(name):
    rng = random.Random(PROMPT_SEEDS[name])
    rows = [{"id": i, "prompt_token_ids": [rng.randrange(3, 256) for _ in range(n)], "max_tokens": NUM_TOKENS,
             "temperature": 0, "ignore_eos": True} for i, n in enumerate(PROMPT_LENGTHS)]
    prompts = os.path.join(work, f"{name}-prompts.jsonl")
    write_jsonl(prompts, rows)
    weights = tiny_models.random_weights(name)
    hf_dir, gguf = os.path.join(work, name), os.path.join(work, name + ".gguf")
    tiny_models.write_hf(hf_dir, name, weights)
    tiny_models.write_gguf(gguf, name, weights)
    return prompts, hf_dir, gguf


for name in tiny_models.MOE_MODELS:
    prompts, hf_dir, gguf_path = write_model(name)  # not `gguf`: that is the module, used below
    for model in (hf_dir, gguf_path):
        label = f"{name} {'gguf' if model == gguf_path else 'hf'}"
        cpu = outputs(work, model, prompts, ["--device", "cpu"])
        gpu32 = outputs(work, model, prompts, cuda_device() + ["--dtype", "fp32"])
        for i, (a, b) in enumerate(zip(gpu32, cpu)):
            c.check(a == b, f"{label} fp32 prompt {i}: CUDA agrees with CPU for {leading_agreement(a, b)}/{len(b)}"
                            f"\n  cuda {a}\n  cpu  {b}")
        gpu16 = outputs(work, model, prompts, cuda_device() + ["--dtype", "bf16"])
        print(f"{label} bf16 leading tokens equal to CPU fp32 per prompt:",
              [leading_agreement(a, b) for a, b in zip(gpu16, cpu)], f"of {NUM_TOKENS}")
        if model == hf_dir:
            for extra in (["--mode", "static"], ["--mode", "sequential"], ["--max-num-batched-tokens", "16"]):
                got = outputs(work, model, prompts, cuda_device() + ["--dtype", "fp32"] + extra)
                c.check(got == gpu32, f"{label}: CUDA outputs change with {extra}")
    gpu_touched = touched_per_step(work, hf_dir, prompts, "cuda")
    cpu_touched = touched_per_step(work, hf_dir, prompts, "cpu")
    c.check(gpu_touched == cpu_touched and all(t is not None and t > 0 for t in gpu_touched),
            f"{name}: experts_touched per step differs\n  cuda {gpu_touched}\n  cpu  {cpu_touched}")

# Mixtral's GGUF with quantized experts, as files ship them: 32-element blocks (Q8_0, Q4_0), and a Q4_K_M-like
# mix (Q4_K gate and up, Q6_K down) on a copy 256 wide, since K-quant rows are whole 256-element superblocks.
prompts, _, _ = write_model("mixtral")
Q = gguf.GGMLQuantizationType
WIDE = dict(tiny_models.MODELS["mixtral"])
WIDE["config"] = dict(WIDE["config"], hidden_size=256, intermediate_size=256)
for label, spec, qtype in (("Q8_0", None, Q.Q8_0), ("Q4_0", None, Q.Q4_0),
                           ("Q4_K/Q6_K", WIDE, {"ffn_gate": Q.Q4_K, "ffn_up": Q.Q4_K, "ffn_down": Q.Q6_K})):
    path = os.path.join(work, f"mixtral-{label.replace('/', '-')}.gguf")
    tiny_models.write_gguf(path, "mixtral", tiny_models.random_weights("mixtral", spec), ffn_qtype=qtype, spec=spec)
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(path).tensors}
    want = qtype if isinstance(qtype, dict) else {"ffn_gate": qtype, "ffn_up": qtype, "ffn_down": qtype}
    c.check(all(types[f"blk.0.{f}_exps.weight"] == t for f, t in want.items()),
            f"the {label} model's expert tensors are not {label}: {types}")
    for dtype in ("bf16", "fp16"):
        quant = outputs(work, path, prompts, cuda_device() + ["--dtype", dtype])
        dequant = outputs(work, path, prompts, cuda_device("moe-experts=dequant") + ["--dtype", dtype])
        lead = [leading_agreement(a, b) for a, b in zip(quant, dequant)]
        print(f"mixtral {label} experts {dtype}: leading tokens equal to the dequantised experts' per prompt:",
              lead, f"of {NUM_TOKENS}")
        c.check(len(lead) == len(PROMPT_LENGTHS) and min(lead) >= NUM_TOKENS // 2,
                f"mixtral {label} experts {dtype}: the quantized expert GEMM leaves the dequantised path early: "
                f"{lead}")
c.done()
