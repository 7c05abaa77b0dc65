"""The tiny random Llama (tiny_models.py) and LoRA adapter files for it, shared by test_lora.py (CPU) and
test_gpu_lora.py (CUDA): pairs in Hugging Face row order, the model with a pair set merged into its weights,
PEFT directories and llama.cpp GGUF LoRA files."""
import json
import os

import numpy as np

import tiny_models as tm

NAME = "llama"
c_model = tm.config_of(NAME)
W = tm.random_weights(NAME)
DIM, HIDDEN, HD = c_model["hidden_size"], c_model["intermediate_size"], c_model["head_dim"]
HEADS, KV_HEADS, LAYERS = c_model["num_attention_heads"], c_model["num_key_value_heads"], c_model["num_hidden_layers"]
SHAPES = {"q_proj": ("self_attn", HEADS * HD, DIM), "k_proj": ("self_attn", KV_HEADS * HD, DIM),
          "v_proj": ("self_attn", KV_HEADS * HD, DIM), "o_proj": ("self_attn", DIM, HEADS * HD),
          "gate_proj": ("mlp", HIDDEN, DIM), "up_proj": ("mlp", HIDDEN, DIM), "down_proj": ("mlp", DIM, HIDDEN)}
GGUF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}


def make_pairs(seed, rank, modules, b_scale, round_to):
    """{(layer, module): (A (rank, in), B (out, rank))} in Hugging Face row order."""
    rng = np.random.default_rng(seed)
    pairs = {}
    for layer in range(LAYERS):
        for m in modules:
            _, out, inp = SHAPES[m]
            a = (rng.uniform(-1, 1, (rank, inp)) * np.sqrt(3.0 / inp)).astype(np.float32)
            b = (rng.uniform(-1, 1, (out, rank)) * b_scale).astype(np.float32)
            pairs[(layer, m)] = (round_to(a), round_to(b))
    return pairs


def merged_weights(pairs, scale):
    w = {k: v.copy() for k, v in W.items()}
    for (layer, m), (a, b) in pairs.items():
        key = f"model.layers.{layer}.{SHAPES[m][0]}.{m}.weight"
        w[key] = (w[key].astype(np.float64) + scale * (b.astype(np.float64) @ a.astype(np.float64))).astype(np.float32)
    return w


def write_peft(directory, pairs, config, dtype="BF16"):
    os.makedirs(directory, exist_ok=True)
    tensors = {}
    for (layer, m), (a, b) in pairs.items():
        p = f"base_model.model.model.layers.{layer}.{SHAPES[m][0]}.{m}."
        tensors[p + "lora_A.weight"], tensors[p + "lora_B.weight"] = a, b
    tm.write_safetensors(os.path.join(directory, "adapter_model.safetensors"), tensors, dtype)
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump(config, f)


def write_gguf_lora(path, pairs, alpha, arch="llama", general_type="adapter"):
    """A llama.cpp GGUF LoRA with F16 tensors."""
    import gguf
    writer = gguf.GGUFWriter(path, arch)
    writer.add_string("general.type", general_type)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    for (layer, m), (a, b) in sorted(pairs.items()):
        if m in ("q_proj", "k_proj"):  # llama.cpp's converter permutes B's rows as it does the base's
            b = tm.permute_for_adjacent_pairs(b, HEADS if m == "q_proj" else KV_HEADS)
        base = f"blk.{layer}.{GGUF_NAMES[m]}.weight"
        writer.add_tensor(base + ".lora_a", np.ascontiguousarray(a, dtype=np.float16))
        writer.add_tensor(base + ".lora_b", np.ascontiguousarray(b, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
