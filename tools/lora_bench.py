"""Inputs of the LoRA benchmark (docs/benchmarks/README.md): NUM_ADAPTERS random PEFT adapters (rank 16 on q, k,
v, o, gate, up and down of every layer) for a Llama-shaped base, and two prompt files of the same requests:
mixed.jsonl (request i names adapter i mod NUM_ADAPTERS) and base.jsonl (no adapter).
Usage: python3 tools/lora_bench.py OUT_DIR [--dim 576 --hidden 1536 --layers 30 --heads 9 --kv-heads 3
--requests 32 --max-tokens 64], then time `cbatch run` on both files (the commands are printed)."""
import argparse
import json
import os
import struct

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("out")
for flag, default in (("dim", 576), ("hidden", 1536), ("layers", 30), ("heads", 9), ("kv-heads", 3),
                      ("requests", 32), ("max-tokens", 64), ("adapters", 4), ("rank", 16)):
    parser.add_argument("--" + flag, type=int, default=default)
a = parser.parse_args()
hd = a.dim // a.heads
shapes = {"q_proj": (a.heads * hd, a.dim), "k_proj": (a.kv_heads * hd, a.dim), "v_proj": (a.kv_heads * hd, a.dim),
          "o_proj": (a.dim, a.heads * hd), "gate_proj": (a.hidden, a.dim), "up_proj": (a.hidden, a.dim),
          "down_proj": (a.dim, a.hidden)}
os.makedirs(a.out, exist_ok=True)
rng = np.random.default_rng(0)
for n in range(a.adapters):
    directory = os.path.join(a.out, f"adapter{n}")
    os.makedirs(directory, exist_ok=True)
    header, blobs, offset = {}, [], 0
    for layer in range(a.layers):
        for module, (out, inp) in shapes.items():
            part = "mlp" if module in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            prefix = f"base_model.model.model.layers.{layer}.{part}.{module}."
            for name, shape in (("lora_A", (a.rank, inp)), ("lora_B", (out, a.rank))):
                data = (rng.standard_normal(shape) * 0.02).astype("<f4").tobytes()
                header[prefix + name + ".weight"] = {"dtype": "F32", "shape": list(shape),
                                                     "data_offsets": [offset, offset + len(data)]}
                blobs.append(data)
                offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(os.path.join(directory, "adapter_model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": a.rank, "lora_alpha": 2 * a.rank, "target_modules": list(shapes)}, f)
topics = ["the history of", "a recipe for", "how to repair", "a poem about", "the physics of", "a letter to"]
things = ["bicycles", "the moon", "old maps", "rainy cities", "coffee", "tiny robots", "lighthouses", "gardens"]
rows = [{"id": f"r{i}", "prompt": f"Write {topics[i % 6]} {things[i % 8]}.", "max_tokens": a.max_tokens,
         "temperature": 0, "ignore_eos": True} for i in range(a.requests)]
for name, with_model in (("base.jsonl", False), ("mixed.jsonl", True)):
    with open(os.path.join(a.out, name), "w") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps(dict(row, model=f"a{i % a.adapters}") if with_model else row) + "\n")
modules = " ".join(f"--lora-modules a{n}={os.path.join(a.out, f'adapter{n}')}" for n in range(a.adapters))
print(f"cbatch run {a.out}/base.jsonl -o /dev/null --device cpu --max-num-seqs {a.requests} --summary base.json")
print(f"cbatch run {a.out}/mixed.jsonl -o /dev/null --device cpu --max-num-seqs {a.requests} {modules} --summary mixed.json")
