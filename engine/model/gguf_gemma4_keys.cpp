// Gemma 4's GGUF keys (gguf_gemma4_keys.hpp), under `{arch}.`, as conversion/gemma.py's Gemma4Model writes them:
// attention.sliding_window_pattern (a bool per layer: sliding), attention.sliding_window,
// attention.key_length (global layers' head) and key_length_swa (sliding layers'), value_length(_swa) equal
// to them, attention.head_count_kv and feed_forward_length as a value or one per layer (the global layers'
// K/V heads; the shared layers' double-wide FFN), attention.shared_kv_layers, embedding_length_per_layer_input,
// rope.freq_base (global) and rope.freq_base_swa. The global layers' proportional RoPE is the rope_freqs tensor:
// a divisor per frequency, 1 for those that turn and 1e30 for the rest. k_eq_v has no key: a global layer
// without attn_v reads its keys as values (llama.cpp's rule). Queries are not scaled (llama.cpp: 1.0).
#include "engine/model/gguf_gemma4_keys.hpp"

#include <algorithm>
#include <cmath>

#include "engine/base/error.hpp"
#include "engine/model/layer_kinds.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {
namespace {

[[noreturn]] void fail(const GgufFile& gguf, const std::string& key, const std::string& problem) {
  throw Error("'" + gguf.path() + "': " + key + " " + problem);
}

// A key holding one value or one per layer, as num_layers values.
std::vector<int64_t> per_layer(const GgufFile& gguf, const std::string& key, int num_layers) {
  const GgufValue* v = gguf.find(key);
  if (v == nullptr) fail(gguf, key, "is missing");
  if (v->type != GgufType::kArray) return std::vector<int64_t>(static_cast<size_t>(num_layers), gguf.get_int(key));
  const std::vector<int64_t>& values = gguf.get_ints(key);
  if (static_cast<int>(values.size()) != num_layers) {
    fail(gguf, key, "has " + std::to_string(values.size()) + " values for " + std::to_string(num_layers) + " layers");
  }
  return values;
}

int positive(const GgufFile& gguf, const std::string& key, int64_t v) {
  if (v < 1 || v > (1 << 20)) fail(gguf, key, "= " + std::to_string(v) + " is out of range (1.." + std::to_string(1 << 20) + ")");
  return static_cast<int>(v);
}

// Each class of layers (sliding, global) takes one value of a per-layer key; `shared_double`: the shared
// layers' value is twice the others' (the double-wide FFN).
int value_of(const GgufFile& gguf, const std::string& key, const std::vector<int64_t>& values, const ModelConfig& c,
             bool global) {
  int found = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.is_global(l) != global) continue;
    const int v = positive(gguf, key, values[static_cast<size_t>(l)]);
    if (found != 0 && v != found) fail(gguf, key, "differs between layers of one kind (" + std::to_string(found) + ", " + std::to_string(v) + ")");
    found = v;
  }
  return found;
}

void read_windows(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  const std::string window_key = p + "attention.sliding_window";
  const int window = static_cast<int>(gguf.get_int(window_key, 0));
  if (window < 1) fail(gguf, window_key, "= " + std::to_string(window) + " must be positive (Gemma 4's sliding layers)");
  const std::vector<int64_t> sliding = per_layer(gguf, p + "attention.sliding_window_pattern", c.num_layers);
  c.layer_window.assign(static_cast<size_t>(c.num_layers), 0);
  for (int l = 0; l < c.num_layers; ++l) c.layer_window[static_cast<size_t>(l)] = sliding[static_cast<size_t>(l)] ? window : 0;
}

void read_heads(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  c.head_dim = positive(gguf, p + "attention.key_length_swa", gguf.get_int(p + "attention.key_length_swa"));
  c.global_head_dim = positive(gguf, p + "attention.key_length", gguf.get_int(p + "attention.key_length"));
  for (const char* v : {"attention.value_length", "attention.value_length_swa"}) {
    const int want = std::string(v).ends_with("_swa") ? c.head_dim : c.global_head_dim;
    if (gguf.get_int(p + v, want) != want) fail(gguf, p + v, "must equal its key length " + std::to_string(want));
  }
  const std::string kv_key = p + "attention.head_count_kv";
  const std::vector<int64_t> kv = per_layer(gguf, kv_key, c.num_layers);
  c.num_kv_heads = value_of(gguf, kv_key, kv, c, false);
  c.global_kv_heads = value_of(gguf, kv_key, kv, c, true);
  if (c.num_kv_heads == 0) c.num_kv_heads = c.global_kv_heads;
}

// The rope_freqs divisors: the leading 1s turn, the rest (1e30: no turn) do not.
float read_rope_fraction(const GgufFile& gguf, const ModelConfig& c) {
  const GgufTensorInfo* info = gguf.find_tensor("rope_freqs.weight");
  if (info == nullptr) throw Error("'" + gguf.path() + "': tensor 'rope_freqs.weight' (the global layers' proportional RoPE) is missing");
  const TensorView view = gguf.tensor_view(*info);
  const int half = c.global_head_dim / 2;
  if (view.numel() != half) {
    throw Error("'" + gguf.path() + "': rope_freqs.weight has " + std::to_string(view.numel()) + " values, expected " +
                "the global head dim / 2 = " + std::to_string(half));
  }
  std::vector<float> divisors(static_cast<size_t>(half));
  tensor_rows_to_f32(view, 0, view.rows, divisors.data());
  const int turning = static_cast<int>(std::find_if(divisors.begin(), divisors.end(), [](float d) { return d != 1.0f; }) - divisors.begin());
  for (int i = turning; i < half; ++i) {
    if (!(divisors[static_cast<size_t>(i)] >= 1e20f)) {
      throw Error("'" + gguf.path() + "': rope_freqs.weight is not proportional RoPE (1 for the turning frequencies, then 1e30)");
    }
  }
  return turning == half ? 0.0f : static_cast<float>(2.0 * turning / c.global_head_dim);
}

void read_ffn(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  const std::string key = p + "feed_forward_length";
  const std::vector<int64_t> widths = per_layer(gguf, key, c.num_layers);
  c.hidden_dim = positive(gguf, key, widths[0]);
  for (int l = 0; l < c.num_layers; ++l) c.double_wide_shared |= widths[static_cast<size_t>(l)] != c.hidden_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    if (widths[static_cast<size_t>(l)] != c.hidden_of(l)) {
      fail(gguf, key, "has " + std::to_string(widths[static_cast<size_t>(l)]) + " for layer " + std::to_string(l) + ", expected " +
                          std::to_string(c.hidden_of(l)) + " (double wide only on the shared-K/V layers)");
    }
  }
}

// The 26B-A4B's MoE block (expert_count, expert_used_count, expert_feed_forward_length): experts beside the
// dense MLP on every layer with a router (ffn_gate_inp), top k renormalised.
void read_moe_block(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  c.num_experts = positive(gguf, p + "expert_count", gguf.get_int(p + "expert_count"));
  c.experts_per_token = positive(gguf, p + "expert_used_count", gguf.get_int(p + "expert_used_count"));
  if (c.experts_per_token > c.num_experts) fail(gguf, p + "expert_used_count", "is above " + p + "expert_count");
  c.expert_hidden_dim = positive(gguf, p + "expert_feed_forward_length", gguf.get_int(p + "expert_feed_forward_length"));
  c.norm_topk_prob = c.experts_beside_dense = true;
  c.layer_sparse.assign(static_cast<size_t>(c.num_layers), 0);
  for (int l = 0; l < c.num_layers; ++l) {
    c.layer_sparse[static_cast<size_t>(l)] = gguf.find_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight") != nullptr;
  }
}

}  // namespace

void read_gemma4_keys(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  read_windows(gguf, p, c);
  read_heads(gguf, p, c);
  c.layer_kv_source = shared_kv_sources(c.layer_window, c.num_layers, gguf.get_int(p + "attention.shared_kv_layers", 0),
                                        "'" + gguf.path() + "': " + p + "attention.shared_kv_layers");
  read_ffn(gguf, p, c);
  const int64_t per_layer_dim = gguf.get_int(p + "embedding_length_per_layer_input", 0);
  if (per_layer_dim < 0 || per_layer_dim > (1 << 14)) {
    fail(gguf, p + "embedding_length_per_layer_input", "= " + std::to_string(per_layer_dim) + " is out of range");
  }
  c.per_layer_dim = static_cast<int>(per_layer_dim);
  c.rope_theta_local = static_cast<float>(gguf.get_float(p + "rope.freq_base_swa", 10000.0));
  c.global_rope_fraction = read_rope_fraction(gguf, c);
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_global(l) || !c.writes_kv(l)) continue;
    const std::string b = "blk." + std::to_string(l) + ".";
    c.global_values_are_keys = gguf.find_tensor(b + "attn_v.weight") == nullptr && gguf.find_tensor(b + "attn_k.weight") != nullptr;
    break;
  }
  c.attn_scale = 1.0f;
  c.value_norm = c.layer_scalar = true;
  if (gguf.find(p + "expert_count")) read_moe_block(gguf, p, c);
}

}  // namespace cbatch
