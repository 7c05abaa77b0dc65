"""LoRA adapter files for the hybrid families' and Gemma 4's tiny models (tiny_hybrid_models.py,
tiny_gemma4_models.py), shared by test_lora_hybrid.py (CPU) and test_gpu_lora.py (CUDA): per family the modules
an adapter targets (every module kind the family has), seeded pairs in Hugging Face row order on the model's own
weight names, the base weights with the pairs merged in, PEFT directories (module names as PEFT wraps the
model's: base_model.model. + the weight's name) and llama.cpp GGUF LoRAs."""
import json
import os
import re

import numpy as np

import tiny_gemma4_models as tg
import tiny_hybrid_models as th

ATTN = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
QWEN_LINEAR = ["linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.in_proj_b", "linear_attn.in_proj_a",
               "linear_attn.out_proj"]
GLU = ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
# family: (model module, model name, modules the adapter targets)
FAMILIES = {
    "qwen3_5": (th, "qwen3_5", ATTN + QWEN_LINEAR + GLU),
    "qwen3_5_moe": (th, "qwen3_5_moe", ATTN + QWEN_LINEAR),
    "qwen3_next": (th, "qwen3_next", ATTN + ["linear_attn.in_proj_qkvz", "linear_attn.in_proj_ba",
                                            "linear_attn.out_proj"]),
    "lfm2": (th, "lfm2", ATTN[:3] + ["self_attn.out_proj", "conv.in_proj", "conv.out_proj", "feed_forward.w1",
                                     "feed_forward.w3", "feed_forward.w2"]),
    "granite_h": (th, "granite_h", ATTN + ["mamba.in_proj", "mamba.out_proj", "shared_mlp.input_linear",
                                           "shared_mlp.output_linear"]),
    "nemotron_h": (th, "nemotron_h", ["mixer." + m for m in ("q_proj", "k_proj", "v_proj", "o_proj", "in_proj",
                                                             "out_proj", "up_proj", "down_proj")]),
    "gemma4": (tg, "dense", ATTN + GLU),
    "gemma4_moe": (tg, "moe", ATTN + GLU),  # the dense MLP beside the experts
}
RANK, ALPHA = 4, 8.0
SCALE = ALPHA / RANK
LAYER_WEIGHT = re.compile(r"^(?:model\.language_model\.|model\.|backbone\.)layers\.(\d+)\.(.+)\.weight$")


def targets(weights, modules):
    """[(weight name, layer, module path)] of the layer weights the adapter targets, in name order."""
    out = []
    for name in sorted(weights):
        m = LAYER_WEIGHT.match(name)
        if m and m.group(2) in modules:
            out.append((name, int(m.group(1)), m.group(2)))
    return out


def make_adapter(weights, modules, seed):
    """{weight name: (A (rank, in), B (out, rank))}: B scaled to each weight's size, so that scale * B A changes
    every projection by about a fifth of its weight."""
    rng = np.random.default_rng(seed)
    pairs = {}
    for name, _, _ in targets(weights, modules):
        out, inp = weights[name].shape
        a = (rng.uniform(-1, 1, (RANK, inp)) * np.sqrt(3.0 / inp)).astype(np.float32)
        w_rms = float(np.sqrt(np.mean(weights[name].astype(np.float64) ** 2)))
        b = (rng.uniform(-1, 1, (out, RANK)) * 0.1 * w_rms * np.sqrt(inp) / SCALE).astype(np.float32)
        pairs[name] = (a, b)
    return pairs


def merged(weights, pairs):
    w = dict(weights)
    for name, (a, b) in pairs.items():
        delta = SCALE * (b.astype(np.float64) @ a.astype(np.float64))
        w[name] = (w[name].astype(np.float64) + delta).astype(np.float32)
    return w


def write_peft(directory, pairs, base):
    os.makedirs(directory, exist_ok=True)
    tensors = {}
    for name, (a, b) in pairs.items():
        p = "base_model.model." + name[:-len("weight")]  # PEFT wraps the model's own module names
        tensors[p + "lora_A.weight"], tensors[p + "lora_B.weight"] = a, b
    th.write_safetensors(os.path.join(directory, "adapter_model.safetensors"), tensors)
    modules = sorted({name.split(".")[-2] for name in pairs})
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": RANK, "lora_alpha": ALPHA, "target_modules": modules,
                   "base_model_name_or_path": base}, f)


def write_gguf_lora(path, pairs, name):
    """A llama.cpp GGUF LoRA of a hybrid (tiny_hybrid_models.py's model `name`), as convert_lora_to_gguf.py writes
    it through the model's converter: names as the base's, and the row moves the converter makes on the base made
    on the pairs (Qwen3.5's value heads tiled: B's rows, or A's columns for out_proj, where the base's move)."""
    import gguf
    c = th.config_of(name)
    arch = gguf.MODEL_ARCH[th.GGUF_ARCH[th.MODELS[name]["family"]]]
    names = gguf.get_tensor_name_map(arch, len(th.layer_types(c)))
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", ALPHA)
    for hf_name, (a, b) in sorted(pairs.items()):
        hf_name = hf_name.replace("language_model.", "")
        if c["model_type"].startswith("qwen3_5"):
            if ".out_proj." in hf_name:
                a = th.tile_value_heads(hf_name, a, c)
            else:
                b = th.tile_value_heads(hf_name, b, c)
        base = names.get_name(hf_name, try_suffixes=(".weight",))
        writer.add_tensor(base + ".lora_a", np.ascontiguousarray(a, dtype=np.float32))
        writer.add_tensor(base + ".lora_b", np.ascontiguousarray(b, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
