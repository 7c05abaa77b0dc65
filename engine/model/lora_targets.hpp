// Where a LoRA target module adds in one layer, read from the tensor table (layer_tensors.hpp): the module's
// name in its format (a PEFT module path after "layers.N.", "self_attn.q_proj", "linear_attn.in_proj_qkv",
// "mixer.up_proj"; a GGUF name after "blk.N.", "attn_q") is a table row's spelling, or a fused row's
// (qkv_proj, gate_up_proj, in_proj_qkvz, in_proj_ba, shared_mlp.input_linear). The layer's kind decides
// whether the row is there, its shape comes from the layer's own sizes, and its rows sit where the backends
// stack it in the row's product (the present rows that join the product, in table order).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/model/lora_product.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

// A gated DeltaNet target whose value heads the adapter holds in the other order from the base's (Qwen3.5: a
// PEFT adapter's Hugging Face order on a GGUF base, whose heads llama.cpp's converter tiles, or a GGUF LoRA's
// tiled heads on a Hugging Face base): B's value-head rows, or A's columns (out_proj's inputs), are put in the
// base's order at load (deltanet_layout.hpp value_head_sources), for both backends.
struct ValueHeadRows {
  bool reorder = false;
  bool adapter_tiled = false;  // the adapter's order (the base's is DeltaNetSizes::tiled_heads)
  bool inputs = false;         // A's columns (out_proj), else B's rows
  int64_t begin = 0;           // first value-head row of B (in_proj_qkv: after q and k)
  int64_t width = 0;           // rows or columns per value head: v_head_dim (v, z, out), 1 (b, a)
};

struct LoraTarget {
  LoraProduct product = LoraProduct::kQkv;
  int64_t row_offset = 0;    // first row of the product it adds to
  int64_t rows = 0;          // output features
  int64_t in_features = 0;
  bool rope_rows = false;    // a q or k projection: B's rows follow the base's RoPE layout (head_dim wide heads)
  int head_dim = 0;          // the layer's
  std::string unused;        // non-empty: the module exists in the checkpoint but the layer never uses it (why)
  ValueHeadRows value_heads;
};

// The target of `module` in `layer`; throws cbatch::Error (the problem, naming the layer and the module) when
// cbatch does not adapt the module or the layer has no such projection.
LoraTarget resolve_lora_target(std::string_view module, int layer, bool gguf, const ModelConfig& base);

}  // namespace cbatch
