"""Linear weights kept in their blocks on CUDA (--cuda-kernel weights=blocks, the default) against the same files
decoded to the compute dtype at load (weights=dequant), skipped without a GPU. Models: the tiny seeded Llama of
tiny_models.py 256 wide as a GGUF with Q4_K_M's FFN mix (Q4_K gate and up, Q6_K down; attention F32), and its
64-wide self as pre-quantized HF directories written by prequantized_files.py: GPTQ 4-bit symmetric (Q4_0 blocks),
FP8 with 32 x 32 block scales (FP8 blocks) and compressed-tensors NVFP4 (NVFP4 blocks). For bf16 and fp16, with the
whole prompts in one step (prefill rows past 32: the scratch matrix and cuBLAS; decode steps of 6 rows: the block
GEMM) and with a 16-token budget (prefill chunks on the block GEMM too):
- the greedy tokens of blocks and dequant lead together for at least half of each request (the block GEMM rounds
  each weight to T as the load path's decoder does, and sums in another order);
- the summary's weight_bytes is smaller with blocks;
- the load note names the block types kept (and dequant's says every linear weight was decoded).
--quantization fp8 on the GPTQ directory says that the blocks are decoded and quantized again. A PEFT LoRA adapter
(q, v, down) on the GPTQ directory applies on top of the blocks: its tokens lead with dequant's as above and differ
from the base model's.
Arguments (--cuda-kernel NAME=VALUE) go to every CUDA run."""
import json
import os
import random

from common import Checks, cuda_device, leading_agreement, need_cuda_device, need_modules, read_jsonl, run, tmpdir
from common import write_jsonl

need_cuda_device()
need_modules("numpy", "gguf")
import gguf  # noqa: E402
import numpy as np  # noqa: E402

import tiny_models  # noqa: E402
from lora_files import make_pairs, write_peft  # noqa: E402
from prequantized_files import NVFP4, fp8, gptq, nvfp4, write_safetensors  # noqa: E402

NUM_TOKENS = 12
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
c = Checks()
work = tmpdir()
rng = random.Random(5)
prompts = os.path.join(work, "prompts.jsonl")
write_jsonl(prompts, [{"id": i, "prompt_token_ids": [rng.randrange(3, 256) for _ in range(n)],
                       "max_tokens": NUM_TOKENS, "temperature": 0, "ignore_eos": True}
                      for i, n in enumerate((5, 12, 21, 30, 40, 33))])


def cbatch_run(model, flags, path=prompts):
    """(output token lists by id, the summary, stderr) of one CUDA run."""
    out, summary = os.path.join(work, "out.jsonl"), os.path.join(work, "summary.json")
    proc = run(["run", path, "-o", out, "--model", model, "--summary", summary, "--max-num-seqs", "8"]
               + cuda_device() + flags)
    rows = sorted(read_jsonl(out), key=lambda r: r["id"])
    return [r["output_token_ids"] for r in rows], json.load(open(summary)), proc.stderr


def write_gguf_q4_k_m():
    spec = dict(tiny_models.MODELS["llama"])
    spec["config"] = dict(spec["config"], hidden_size=256, intermediate_size=256)
    Q = gguf.GGMLQuantizationType
    path = os.path.join(work, "llama-q4_k_m.gguf")
    tiny_models.write_gguf(path, "llama", tiny_models.random_weights("llama", spec), spec=spec,
                           ffn_qtype={"ffn_gate": Q.Q4_K, "ffn_up": Q.Q4_K, "ffn_down": Q.Q6_K})
    return path


def write_prequantized(method):
    """The tiny Llama's directory with every Linear quantized by `method` (gptq, fp8, nvfp4)."""
    directory = os.path.join(work, method)
    tiny_models.write_hf(directory, "llama", {"model.embed_tokens.weight": np.zeros((1, 1), np.float32)})
    nrng, tensors = np.random.default_rng(3), {}
    for name, w in tiny_models.random_weights("llama").items():
        stem = name[:-len("weight")]
        if not any(name.endswith(f"{lin}.weight") for lin in LINEARS):
            tensors[name] = ("F32", np.asarray(w, "<f4"))
        elif method == "gptq":
            parts, _ = gptq(w, 4, True, False, nrng)
            tensors.update({stem + k: v for k, v in parts.items()})
        elif method == "fp8":
            codes, scales, _ = fp8(w, (32, 32))
            tensors[name], tensors[stem + "weight_scale_inv"] = ("F8_E4M3", codes), ("F32", scales.astype("<f4"))
        else:
            parts, _ = nvfp4(w)
            tensors.update({stem + k: v for k, v in parts.items()})
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
    config = {
        "gptq": dict(quant_method="gptq", bits=4, group_size=32, sym=True, desc_act=False, checkpoint_format="gptq",
                     modules_to_not_convert=["lm_head"]),
        "fp8": dict(quant_method="fp8", fmt="e4m3", activation_scheme="dynamic", weight_block_size=[32, 32]),
        "nvfp4": NVFP4,
    }[method]
    path = os.path.join(directory, "config.json")
    cfg = json.load(open(path))
    cfg["quantization_config"] = config
    json.dump(cfg, open(path, "w"), indent=1)
    return directory


MODELS = [(write_gguf_q4_k_m(), "Q4_K_M gguf", ("q4_k", "q6_k")), (write_prequantized("gptq"), "gptq", ("q4_0",)),
          (write_prequantized("fp8"), "fp8", ("fp8_e4m3",)), (write_prequantized("nvfp4"), "nvfp4", ("nvfp4",))]
for model, label, types in MODELS:
    for dtype in ("bf16", "fp16"):
        for budget in ("512", "16"):
            flags = ["--dtype", dtype, "--max-num-batched-tokens", budget]
            blocks, blocks_summary, blocks_log = cbatch_run(model, flags)
            dequant, dequant_summary, dequant_log = cbatch_run(model, flags + ["--cuda-kernel", "weights=dequant"])
            lead = [leading_agreement(a, b) for a, b in zip(blocks, dequant)]
            name = f"{label} {dtype} budget {budget}"
            print(f"{name}: leading tokens of blocks equal to dequant's per prompt:", lead, f"of {NUM_TOKENS}")
            c.check(len(lead) == 6 and min(lead) >= NUM_TOKENS // 2, f"{name}: blocks leave dequant early: {lead}")
            c.check(blocks_summary["weight_bytes"] < dequant_summary["weight_bytes"],
                    f"{name}: weight_bytes {blocks_summary['weight_bytes']} with blocks, "
                    f"{dequant_summary['weight_bytes']} decoded")
            c.check("linear weights kept in their blocks" in blocks_log and all(t in blocks_log for t in types),
                    f"{name}: the load note does not name {types}:\n{blocks_log[-2000:]}")
            c.check("weights=dequant: every linear weight decoded" in dequant_log,
                    f"{name}: dequant's load note is missing:\n{dequant_log[-2000:]}")
            print(f"{name}: weight_bytes {blocks_summary['weight_bytes']} blocks, {dequant_summary['weight_bytes']} "
                  f"dequant")

# A LoRA adapter over the GPTQ blocks: the delta is added after the block GEMM and after the scratch path's cuBLAS.
adapter = os.path.join(work, "adapter")
write_peft(adapter, make_pairs(11, 4, ["q_proj", "v_proj", "down_proj"], 0.3, tiny_models.to_bf16),
           {"peft_type": "LORA", "r": 4, "lora_alpha": 8.0, "target_modules": ["q_proj", "v_proj", "down_proj"]})
lora_prompts = os.path.join(work, "lora-prompts.jsonl")
write_jsonl(lora_prompts, [dict(r, model="P") for r in read_jsonl(prompts)])
lora_flags = ["--dtype", "bf16", "--lora-modules", f"P={adapter}"]
with_lora, _, _ = cbatch_run(MODELS[1][0], lora_flags, lora_prompts)
with_lora_dequant, _, _ = cbatch_run(MODELS[1][0], lora_flags + ["--cuda-kernel", "weights=dequant"], lora_prompts)
base, _, _ = cbatch_run(MODELS[1][0], ["--dtype", "bf16"])
lead = [leading_agreement(a, b) for a, b in zip(with_lora, with_lora_dequant)]
print("gptq bf16 with LoRA: leading tokens of blocks equal to dequant's per prompt:", lead, f"of {NUM_TOKENS}")
c.check(len(lead) == 6 and min(lead) >= NUM_TOKENS // 2, f"gptq with LoRA: blocks leave dequant early: {lead}")
c.check(with_lora != base, "gptq with LoRA: the adapter changes no token of the blocks run")

_, _, log = cbatch_run(MODELS[1][0], ["--dtype", "bf16", "--quantization", "fp8"])
c.check("--quantization fp8: the model's linear weights in blocks are decoded and quantized again" in log,
        f"--quantization fp8 on GPTQ: no note that the blocks are not kept:\n{log[-2000:]}")
c.done()
