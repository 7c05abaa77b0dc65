"""Seeded random-weight tiny Gemma 4 text models (gemma4_reference.py), written as Hugging Face directories
(config.json as the Hub ships Gemma4ForConditionalGeneration: the text model in text_config beside tiny
vision_config and audio_config, weights under model.language_model., the byte-level tokenizer of tiny_models.py)
and, with the same weights, as GGUF files the way llama.cpp's converter (conversion/gemma.py, Gemma4Model)
writes them: its tensor names, norms as they are (no 1 + w), rope_freqs of the global layers (1 per turning
frequency, 1e30 for the others), per-layer feed_forward_length and head_count_kv arrays, key_length for the
global layers and key_length_swa for the sliding ones, the sliding-window pattern as bools,
attention.shared_kv_layers, embedding_length_per_layer_input; a MoE layer's router scale as
ffn_gate_inp.scale, its per-expert scale as ffn_down_exps.scale, its experts fused as ffn_gate_up_exps.

"dense" has everything that bites on a small model: sliding layers (window 8, shorter than the prompts) and
global ones with another head size (32 against 16), K/V head count (1 against 2) and proportional RoPE (a
quarter of the frequencies turn), values that are the keys on the global layers, the last two layers reading
the K/V of layers 3 and 2 (their FFN double wide; the directory still holds their unused k/v projections, as
transformers ignores them), per-layer inputs of 8, layer scalars away from 1, a final softcap the logits reach.
"moe" is the 26B-A4B layout: no per-layer inputs, every layer's dense MLP beside 8 experts (top 2).
"wide" is "dense" at the checkpoints' head sizes: sliding layers of head 256, global ones of 512 (the CUDA
backend's head-512 tile kernel, test_gpu_gemma4.py)."""
import json
import os
import zlib

import numpy as np

from tiny_models import BOS, EOS, VOCAB, write_byte_tokenizer, write_safetensors, write_tokenizer, byte_tokens

S, G = "sliding_attention", "full_attention"
ROPE = {S: dict(rope_type="default", rope_theta=10000.0),
        G: dict(rope_type="proportional", partial_rotary_factor=0.25, rope_theta=1000000.0)}
BASE = dict(model_type="gemma4_text", vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, head_dim=16,
            global_head_dim=32, num_key_value_heads=2, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
            max_position_embeddings=512, sliding_window=8, rope_parameters=ROPE, tie_word_embeddings=True,
            final_logit_softcapping=5.0, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=0, dtype="float32",
            attention_bias=False, use_bidirectional_attention="vision", vocab_size_per_layer_input=VOCAB)
MODELS = {
    "dense": dict(BASE, num_hidden_layers=6, intermediate_size=48, layer_types=[S, S, G, S, S, G],
                  num_global_key_value_heads=1, attention_k_eq_v=True, num_kv_shared_layers=2,
                  use_double_wide_mlp=True, hidden_size_per_layer_input=8),
    # "dense" at the real head sizes (256 and 512; 1 K/V head against 2): the CUDA backend's head-512 kernels.
    "wide": dict(BASE, num_hidden_layers=6, intermediate_size=48, layer_types=[S, S, G, S, S, G], head_dim=256,
                 global_head_dim=512, num_global_key_value_heads=1, attention_k_eq_v=True, num_kv_shared_layers=2,
                 use_double_wide_mlp=True, hidden_size_per_layer_input=8),
    "moe": dict(BASE, num_hidden_layers=4, intermediate_size=32, layer_types=[S, G, S, G],
                num_global_key_value_heads=1, attention_k_eq_v=True, num_kv_shared_layers=0,
                hidden_size_per_layer_input=0, enable_moe_block=True, num_experts=8, top_k_experts=2,
                moe_intermediate_size=16),
}


def config_of(name):
    return json.loads(json.dumps(MODELS[name]))


def kv_sources(c):
    n, types = c["num_hidden_layers"], c["layer_types"]
    first = n - c.get("num_kv_shared_layers", 0)
    return [i if i < first else max(j for j in range(first) if types[j] == types[i]) for i in range(n)]


def random_weights(name):
    """Hugging Face names (under model.language_model.) -> float32 arrays, drawn in a fixed order."""
    c = config_of(name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    w = {}

    def put(key, *shape, scale=None, offset=0.0):
        fan_in = shape[-1] if len(shape) > 1 else 1
        s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
        w[key] = (rng.standard_normal(shape) * s + offset).astype(np.float32)

    dim, heads, n = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    P = c.get("hidden_size_per_layer_input") or 0
    p = "model.language_model."
    put(p + "embed_tokens.weight", VOCAB, dim, scale=0.15)
    sources = kv_sources(c)
    for i in range(n):
        b = f"{p}layers.{i}."
        is_global = c["layer_types"][i] == G
        hd = c["global_head_dim"] if is_global else c["head_dim"]
        kv = c["num_global_key_value_heads"] if is_global and c["attention_k_eq_v"] else c["num_key_value_heads"]
        ff = c["intermediate_size"] * (2 if c.get("use_double_wide_mlp") and sources[i] != i else 1)
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            put(b + norm + ".weight", dim, scale=0.1, offset=1.0)
        put(b + "self_attn.q_proj.weight", heads * hd, dim)
        put(b + "self_attn.q_norm.weight", hd, scale=0.1, offset=1.0)
        put(b + "self_attn.k_proj.weight", kv * hd, dim)
        put(b + "self_attn.k_norm.weight", hd, scale=0.1, offset=1.0)
        if not (is_global and c["attention_k_eq_v"]):
            put(b + "self_attn.v_proj.weight", kv * hd, dim)
        put(b + "self_attn.o_proj.weight", dim, heads * hd)
        put(b + "mlp.gate_proj.weight", ff, dim)
        put(b + "mlp.up_proj.weight", ff, dim)
        put(b + "mlp.down_proj.weight", dim, ff)
        w[b + "layer_scalar"] = rng.uniform(0.3, 1.8, 1).astype(np.float32)  # far from 1, as trained ones are
        if P:
            put(b + "per_layer_input_gate.weight", P, dim, scale=0.4)
            put(b + "per_layer_projection.weight", dim, P)
            put(b + "post_per_layer_input_norm.weight", dim, scale=0.1, offset=1.0)
        if c.get("enable_moe_block"):
            E, width = c["num_experts"], c["moe_intermediate_size"]
            put(b + "router.proj.weight", E, dim, scale=1.0)
            put(b + "router.scale", dim, scale=0.2, offset=1.0)
            put(b + "router.per_expert_scale", E, scale=0.3, offset=1.0)
            put(b + "experts.gate_up_proj", E, 2 * width, dim)
            put(b + "experts.down_proj", E, dim, width)
            for norm in ("pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"):
                put(b + norm + ".weight", dim, scale=0.1, offset=1.0)
    put(p + "norm.weight", dim, scale=0.1, offset=1.0)
    if P:
        put(p + "embed_tokens_per_layer.weight", VOCAB, n * P, scale=0.5)
        put(p + "per_layer_model_projection.weight", n * P, dim)
        put(p + "per_layer_projection_norm.weight", P, scale=0.1, offset=1.0)
    return w


def hf_config(name):
    c = config_of(name)
    return {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "bos_token_id": BOS,
            "eos_token_id": EOS, "text_config": c, "vision_config": {"model_type": "gemma4_vision"},
            "audio_config": {"model_type": "gemma4_audio"}, "dtype": "float32"}


def write_hf(directory, name, weights):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(hf_config(name), f, indent=1)
    write_safetensors(os.path.join(directory, "model.safetensors"), weights)
    write_tokenizer(directory, byte_tokens(), {BOS: True, EOS: True}, ["Ġ t"])


# ---------------------------------------------------------------------------------------------------- GGUF
LAYER_NAMES = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
               "pre_feedforward_layernorm.weight": "ffn_norm.weight",
               "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
               "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
               "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
               "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
               "mlp.down_proj.weight": "ffn_down.weight", "layer_scalar": "layer_output_scale.weight",
               "per_layer_input_gate.weight": "inp_gate.weight", "per_layer_projection.weight": "proj.weight",
               "post_per_layer_input_norm.weight": "post_norm.weight", "router.proj.weight": "ffn_gate_inp.weight",
               "router.scale": "ffn_gate_inp.scale", "router.per_expert_scale": "ffn_down_exps.scale",
               "experts.gate_up_proj": "ffn_gate_up_exps.weight", "experts.down_proj": "ffn_down_exps.weight",
               "pre_feedforward_layernorm_2.weight": "pre_ffw_norm_2.weight",
               "post_feedforward_layernorm_1.weight": "post_ffw_norm_1.weight",
               "post_feedforward_layernorm_2.weight": "post_ffw_norm_2.weight"}
MODEL_NAMES = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
               "embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
               "per_layer_model_projection.weight": "per_layer_model_proj.weight",
               "per_layer_projection_norm.weight": "per_layer_proj_norm.weight"}


def gguf_name(key):
    key = key[len("model.language_model."):]
    if key.startswith("layers."):
        _, i, rest = key.split(".", 2)
        return f"blk.{i}.{LAYER_NAMES[rest]}"
    return MODEL_NAMES[key]


def write_metadata(w, c):
    n, a = c["num_hidden_layers"], "gemma4."
    sources = kv_sources(c)
    swa = [t == S for t in c["layer_types"]]
    ff = [c["intermediate_size"] * (2 if c.get("use_double_wide_mlp") and sources[i] != i else 1) for i in range(n)]
    kv_g = c["num_global_key_value_heads"] if c["attention_k_eq_v"] else c["num_key_value_heads"]
    w.add_block_count(n)
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_feed_forward_length(ff if c.get("use_double_wide_mlp") else c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv([c["num_key_value_heads"] if s else kv_g for s in swa])
    w.add_rope_freq_base(c["rope_parameters"][G]["rope_theta"])
    w.add_rope_freq_base_swa(c["rope_parameters"][S]["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_key_length(c["global_head_dim"])
    w.add_value_length(c["global_head_dim"])
    w.add_final_logit_softcapping(c["final_logit_softcapping"])
    w.add_sliding_window(c["sliding_window"])
    w.add_shared_kv_layers(c["num_kv_shared_layers"])
    w.add_embedding_length_per_layer_input(c.get("hidden_size_per_layer_input") or 0)
    w.add_sliding_window_pattern(swa)
    w.add_key_length_swa(c["head_dim"])
    w.add_value_length_swa(c["head_dim"])
    w.add_rope_dimension_count(c["global_head_dim"])
    w.add_rope_dimension_count_swa(c["head_dim"])
    if c.get("enable_moe_block"):
        w.add_expert_count(c["num_experts"])
        w.add_expert_used_count(c["top_k_experts"])
        w.add_expert_feed_forward_length(c["moe_intermediate_size"])


def rope_freqs(c):
    half = c["global_head_dim"] // 2
    turning = int(c["global_head_dim"] * c["rope_parameters"][G]["partial_rotary_factor"] / 2)
    return np.array([1.0] * turning + [1e30] * (half - turning), dtype=np.float32)


def write_gguf(path, name, weights, edit_metadata=None):
    import gguf
    c = config_of(name)
    w = gguf.GGUFWriter(path, "gemma4")
    write_metadata(w, c)
    if edit_metadata:
        edit_metadata(w)
    write_byte_tokenizer(w)
    w.add_tensor("rope_freqs.weight", rope_freqs(c))
    for key, t in weights.items():
        w.add_tensor(gguf_name(key), np.ascontiguousarray(t, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_model(directory, name):
    """(Hugging Face directory, GGUF path) of the model, written under directory."""
    weights = random_weights(name)
    hf_dir, gguf_path = os.path.join(directory, "gemma4-" + name), os.path.join(directory, "gemma4-" + name + ".gguf")
    write_hf(hf_dir, name, weights)
    write_gguf(gguf_path, name, weights)
    return hf_dir, gguf_path
