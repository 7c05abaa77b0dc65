// Hybrid families' GGUF keys (gguf_hybrid_keys.hpp), under `{arch}.`: ssm.conv_kernel (the conv's taps),
// ssm.state_size (key head dim), ssm.group_count (key heads), ssm.time_step_rank (value heads),
// ssm.inner_size (value heads * value head dim); attention.recurrent_layers (a bool per block, MTP blocks
// included) or full_attention_interval; rope.dimension_count (the rotary dims); nextn_predict_layers (MTP
// blocks at the end). llama.cpp's converter reorders Qwen3.5's value heads from grouped by key head to tiled
// (value head j reads key head j % key heads), keeps Qwen3-Next's ssm_ba grouped by key head, and stores
// A = -exp(A_log) as ssm_a: all recorded in the config (tiled_heads, grouped_ba, decay_from_log false), the
// weights are used as stored.
#include "engine/model/gguf_hybrid_keys.hpp"

#include "engine/base/error.hpp"
#include "engine/model/layer_kinds.hpp"

namespace cbatch {
namespace {

class Keys {
 public:
  Keys(const GgufFile& gguf, const std::string& p) : gguf_(gguf), p_(p) {}

  int size(const std::string& key) const {
    const int64_t v = gguf_.get_int(p_ + key);
    if (v < 1 || v > (1 << 20)) fail(key, "= " + std::to_string(v) + " is out of range (1.." + std::to_string(1 << 20) + ")");
    return static_cast<int>(v);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error("'" + gguf_.path() + "': " + p_ + key + " " + problem);
  }
  const GgufFile& gguf() const { return gguf_; }
  std::string key(const std::string& k) const { return p_ + k; }

 private:
  const GgufFile& gguf_;
  const std::string& p_;
};

DeltaNetSizes read_deltanet_sizes(const Keys& k, const Family& family) {
  DeltaNetSizes d;
  d.conv_kernel = k.size("ssm.conv_kernel");
  d.k_head_dim = k.size("ssm.state_size");
  d.num_k_heads = k.size("ssm.group_count");
  d.num_v_heads = k.size("ssm.time_step_rank");
  const int inner = k.size("ssm.inner_size");
  if (d.num_v_heads % d.num_k_heads != 0) {
    k.fail("ssm.time_step_rank", "= " + std::to_string(d.num_v_heads) + " (value heads) is not a multiple of " +
                                     k.key("ssm.group_count") + " = " + std::to_string(d.num_k_heads) + " (key heads)");
  }
  if (inner % d.num_v_heads != 0) {
    k.fail("ssm.inner_size", "= " + std::to_string(inner) + " is not a multiple of " + k.key("ssm.time_step_rank") +
                                 " = " + std::to_string(d.num_v_heads));
  }
  d.v_head_dim = inner / d.num_v_heads;
  d.tiled_heads = family.gguf_tiled_value_heads;
  d.grouped_ba = family.deltanet_grouped_projections;
  return d;
}

std::vector<LayerKind> read_layer_kinds(const Keys& k, int num_layers) {
  if (!k.gguf().find(k.key("attention.recurrent_layers"))) {
    const int interval = static_cast<int>(k.gguf().get_int(k.key("full_attention_interval"), 4));
    if (interval < 1) k.fail("full_attention_interval", "= " + std::to_string(interval) + " must be positive");
    return layer_kinds_from_interval(num_layers, interval);
  }
  const std::vector<int64_t>& flags = k.gguf().get_ints(k.key("attention.recurrent_layers"));
  std::vector<LayerKind> kinds = layer_kinds_from_recurrent_flags(flags, num_layers);
  if (kinds.empty()) {
    k.fail("attention.recurrent_layers", "has " + std::to_string(flags.size()) + " flags for " +
                                             std::to_string(num_layers) + " layers");
  }
  return kinds;
}

}  // namespace

void read_hybrid_keys(const GgufFile& gguf, const Family& family, const std::string& p, ModelConfig& c,
                      std::vector<std::string>& notes) {
  const Keys k(gguf, p);
  if (family.default_rotary_factor > 0) {
    const int dims = static_cast<int>(gguf.get_int(p + "rope.dimension_count", static_cast<int64_t>(c.head_dim * family.default_rotary_factor)));
    if (dims < 2 || dims % 2 != 0 || dims > c.head_dim) {
      k.fail("rope.dimension_count", "= " + std::to_string(dims) + " must be even, from 2 to the head dim " + std::to_string(c.head_dim));
    }
    c.rotary_dim = dims == c.head_dim ? 0 : dims;
  }
  if (family.recurrent_kind != LayerKind::kDeltaNet) return;
  const int64_t mtp = gguf.get_int(p + "nextn_predict_layers", 0);
  if (mtp < 0 || mtp >= c.num_layers) {
    k.fail("nextn_predict_layers", "= " + std::to_string(mtp) + " leaves no layers of block_count " + std::to_string(c.num_layers));
  }
  if (mtp > 0) {
    notes.push_back(std::to_string(mtp) + " multi-token-prediction block(s) (nextn_predict_layers) skipped: generation does not use them");
  }
  c.num_layers -= static_cast<int>(mtp);
  c.layer_kinds = read_layer_kinds(k, c.num_layers);
  c.deltanet = read_deltanet_sizes(k, family);
}

}  // namespace cbatch
