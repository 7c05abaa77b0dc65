#include "cuda/backend/backend_checks.hpp"

#include <algorithm>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/backend/batch_indices.hpp"
#include "cuda/backend/cuda_device.hpp"
#include "cuda/moe/moe.hpp"
#include "cuda/recurrent/deltanet_shape.hpp"
#include "engine/model/layer_kinds.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

[[noreturn]] void unsupported(const std::string& what) { throw Error("the CUDA backend does not support " + what); }

std::vector<int> window_kinds(const ModelConfig& c) {
  std::vector<int> kinds;
  for (int l = 0; l < std::max(c.num_layers, 1); ++l) {
    const int w = c.num_layers > 0 ? c.window(l) : 0;
    if (std::find(kinds.begin(), kinds.end(), w) == kinds.end()) kinds.push_back(w);
  }
  return kinds;
}

namespace {

// What the MoE kernels take (moe.hpp): up to kMoeMaxExperts experts, SwiGLU, GeGLU or the clamped SwiGLU,
// either routing rule, router and expert biases (gpt-oss).
void check_moe(const ModelConfig& c) {
  if (c.num_experts > kMoeMaxExperts || c.experts_per_token <= 0 || c.experts_per_token > c.num_experts ||
      c.expert_hidden_dim <= 0) {
    unsupported(c.architecture + "'s " + std::to_string(c.num_experts) + " experts with " +
                std::to_string(c.experts_per_token) + " per token and width " + std::to_string(c.expert_hidden_dim) +
                " (the MoE kernels take 1 to " + std::to_string(kMoeMaxExperts) + " experts; use --device cpu)");
  }
}

// The attention shapes the kernels take, for every layer's own (Gemma 4's global layers have their own head
// size and K/V heads): GQA groups of at most kAttentionItemsPerTile q heads, head sizes that are multiples of 16
// up to 128, 256 and 512 (the tile kernel alone at 512: paged_attention_block.cuh; the decode kernels take the
// layers of the model's base shape, the others' decode rows go through the tile kernel: cuda_forward.hpp).
void check_attention_shapes(const ModelConfig& c) {
  for (int l = -1; l < c.num_layers; ++l) {  // -1: the base shape, which sizes the tile list
    if (l >= 0 && !c.is_attention(l)) continue;
    const int kv_heads = l < 0 ? c.num_kv_heads : c.kv_heads_of(l);
    const int hd = l < 0 ? c.head_dim : c.head_dim_of(l);
    const std::string where = l < 0 ? c.architecture + "'s" : c.architecture + "'s layer " + std::to_string(l) + ":";
    if (kv_heads <= 0 || c.num_heads % kv_heads != 0 || c.num_heads / kv_heads > kAttentionItemsPerTile) {
      unsupported(where + " " + std::to_string(c.num_heads) + " query heads over " + std::to_string(kv_heads) +
                  " kv heads");
    }
    if ((hd % 16 != 0 || hd > 128 || hd <= 0) && hd != kWideHeadDim && hd != kWidestHeadDim) {
      unsupported(where + " head_dim " + std::to_string(hd) +
                  ": the attention kernels take multiples of 16 up to 128, 256 and 512 (use --device cpu)");
    }
  }
}

// What the recurrent kernels take (cuda/recurrent/): gated DeltaNet layers (Qwen3.5; Qwen3-Next's projections,
// grouped by key head in its files, are put in Qwen3.5's order at upload: device_weights.cpp), LFM2's
// short convs and Mamba-2 layers (heads a multiple of the groups), each conv of at most kMaxConvKernel taps;
// any other recurrent kind is refused by name.
void check_conv_taps(const char* kind, int taps) {
  if (taps < 1 || taps > deltanet_detail::kMaxConvKernel) {
    unsupported(std::string("a ") + kind + " conv of " + std::to_string(taps) + " taps (at most " +
                std::to_string(deltanet_detail::kMaxConvKernel) + "; use --device cpu)");
  }
}

void check_recurrent(const ModelConfig& c) {
  bool deltanet = false, short_conv = false, mamba2 = false;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerKind kind = c.layer_kind(l);
    deltanet = deltanet || kind == LayerKind::kDeltaNet;
    short_conv = short_conv || kind == LayerKind::kShortConv;
    mamba2 = mamba2 || kind == LayerKind::kMamba2;
    if (c.is_recurrent(l) && kind != LayerKind::kDeltaNet && kind != LayerKind::kShortConv &&
        kind != LayerKind::kMamba2) {
      unsupported(c.architecture + "'s recurrent layer " + std::to_string(l) + " (" +
                  std::string(layer_kind_name(kind)) + ") yet (use --device cpu)");
    }
  }
  if (deltanet) {
    const DeltaNetSizes& d = c.deltanet;
    check_conv_taps("DeltaNet", d.conv_kernel);
  }
  if (short_conv) check_conv_taps("short", c.short_conv_kernel);
  if (mamba2) {
    const Mamba2Sizes& m = c.mamba;
    if (m.num_heads <= 0 || m.head_dim <= 0 || m.state_size <= 0 || m.num_groups <= 0 || m.num_heads % m.num_groups != 0) {
      unsupported(c.architecture + "'s Mamba-2 sizes (" + std::to_string(m.num_heads) + " heads of " +
                  std::to_string(m.head_dim) + ", state " + std::to_string(m.state_size) + ", " +
                  std::to_string(m.num_groups) + " groups; use --device cpu)");
    }
    check_conv_taps("Mamba-2", m.conv_kernel);
  }
}

}  // namespace

const ModelConfig& checked_config(const ModelConfig& c) {
  if (c.dim <= 0 || (c.hidden_dim <= 0 && !c.is_moe()) || c.num_layers < 0 || c.vocab_size <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0) {
    unsupported("a model config with non-positive sizes");
  }
  if (c.is_moe()) check_moe(c);
  // Before the encoder check: Nemotron-H's relu^2 FFN is not gated, and it is a hybrid, not an encoder.
  if (c.has_recurrent_layers()) check_recurrent(c);
  // Nemotron-H's single-sublayer layers and Granite's multipliers run (step_forward.cpp, step_head.cpp), and
  // so does a plain FFN of relu^2 without biases (Nemotron-H's MLP); other plain FFNs are encoders'.
  const bool relu2_ffn = !c.gated_ffn && c.activation == Activation::kRelu2 && !c.ffn_bias;
  if (relu2_ffn && c.is_moe()) unsupported(c.architecture + "'s ungated (relu^2) experts yet (use --device cpu)");
  if (c.single_sublayer && c.o_bias) {  // the final norm's gather adds no bias (step_head.cpp)
    unsupported(c.architecture + "'s o bias on layers without an FFN yet (use --device cpu)");
  }
  if (c.is_encoder() || c.bidirectional || c.learned_positions || c.layer_norm || c.post_norm ||
      (!c.gated_ffn && !relu2_ffn)) {
    unsupported("encoder models yet (" + c.architecture + ": bidirectional attention, LayerNorm, post-norm; use --device cpu)");
  }
  if (c.activation == Activation::kGeluErf) unsupported("the erf GELU (hidden_act \"gelu\") yet (use --device cpu)");
  check_attention_shapes(c);
  if (window_kinds(c).size() > static_cast<size_t>(kMaxWindowKinds)) {
    unsupported("more than " + std::to_string(kMaxWindowKinds) + " different sliding windows across the layers");
  }
  // Mixture-of-experts layers run on moe_ffn.cpp (check_moe).
  // Every other part of the family description (norm offset, biases, q/k norms, sandwich norms, GeGLU,
  // embedding scale, query scale, softcaps, windows, attention sinks on every attention kernel, the output
  // bias, local RoPE base, every RoPE scaling) is implemented.
  // head_dim 256 (Gemma's) and 512 (Gemma 4's global layers) run on the CUDA-core attention kernels (see
  // context_with_shared_memory), and so do Gemma 4's per-layer inputs, layer scalars, V norm, values that are
  // the keys, K/V shared across layers, double-wide FFNs, MoE beside the dense MLP and proportional RoPE.
  return c;
}

void check_options(const CudaBackendOptions& o) {
  if (o.max_batch_tokens <= 0) throw Error("max_batch_tokens must be positive, got " + std::to_string(o.max_batch_tokens));
  if (o.max_num_seqs <= 0) throw Error("max_num_seqs must be positive, got " + std::to_string(o.max_num_seqs));
  if (o.max_context < 0) throw Error("max_context must not be negative, got " + std::to_string(o.max_context));
  if (!(o.gpu_memory_utilization > 0.0f && o.gpu_memory_utilization <= 1.0f)) {
    throw Error("gpu_memory_utilization must be in (0, 1], got " + std::to_string(o.gpu_memory_utilization));
  }
  if (o.fp8_weights && o.dtype == ComputeDType::kF32) {
    throw Error("--quantization fp8 writes its GEMMs' outputs in bf16 or fp16; it cannot run with --dtype fp32 "
                "(use --dtype bf16 or fp16)");
  }
  if (o.fp8_weights || o.fp8_kv_cache) {
    const char* flag = o.fp8_weights ? "--quantization fp8" : "--kv-cache-dtype fp8";
    if (cuda_compute_capability(o.device_index) < 89) {
      throw Error(std::string(flag) + " needs a GPU of compute capability 8.9 or newer (Ada, Hopper, Blackwell); " +
                  cuda_device_description(o.device_index) + " has none of FP8's tensor-core or conversion "
                  "instructions");
    }
  }
  if (o.fp8_kv_cache && o.dtype == ComputeDType::kF32) {
    throw Error("--kv-cache-dtype fp8 needs --dtype bf16 or fp16 (its kernels have no fp32 build)");
  }
}

}  // namespace cbatch
