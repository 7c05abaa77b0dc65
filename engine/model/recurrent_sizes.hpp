// The sizes of the recurrent layer kinds (ModelConfig::mamba, ModelConfig::deltanet) and the sizes derived from
// them, described once: the loaders fill them, the CPU backend reads them, and the CUDA kernels take them as
// they are (cuda/recurrent/): the methods are constexpr, so that device code may call them
// (--expt-relaxed-constexpr), and the header is C++17 and includes nothing, so that nvcc and the block
// emulator read it too.
#pragma once

namespace cbatch {

// A Mamba-2 layer's sizes (Granite's mamba_*, Nemotron-H's mamba_num_heads, ...; GGUF ssm.*). Its in
// projection has rows [z (inner) | x (inner) | B (groups * state) | C (groups * state) | dt (heads)]; the conv
// mixes x|B|C; head h reads B and C of group h / (num_heads / num_groups); the gated norm is an RMSNorm over
// groups of inner / num_groups values. dt = softplus(dt + dt_bias) clamped to [dt_min, dt_max].
struct Mamba2Sizes {
  int num_heads = 0;
  int head_dim = 0;
  int state_size = 0;
  int num_groups = 0;
  int conv_kernel = 0;
  float dt_min = 0.0f;
  float dt_max = 0.0f;  // 0: no upper clamp

  constexpr int inner() const { return num_heads * head_dim; }
  constexpr int conv_dim() const { return inner() + 2 * num_groups * state_size; }
  constexpr int in_proj_dim() const { return inner() + conv_dim() + num_heads; }
  constexpr int group_of(int head) const { return head / (num_heads / num_groups); }
  constexpr int group_width() const { return inner() / num_groups; }  // values the gated norm takes at once
};

// A gated DeltaNet layer's sizes (Qwen3.5's linear_* config fields; GGUF ssm.*). Its q/k/v projection has
// 2 * num_k_heads * k_head_dim + num_v_heads * v_head_dim channels, which the causal depthwise convolution
// (conv_kernel taps) mixes over time; value head j reads key head j / (num_v_heads / num_k_heads), or with
// tiled_heads (llama.cpp's converter reorders the value heads) j % num_k_heads. Qwen3-Next's fused
// projections hold their rows grouped by key head: with grouped_qkvz, per key head [q, k, v (its value heads),
// z (its value heads)]; with grouped_ba, per key head [b (its value heads), a (its value heads)]
// (deltanet_layout.hpp: the CPU puts a product's values in the standard order, the CUDA upload the weight's
// rows, so its kernels read the sizes and tiled_heads only).
struct DeltaNetSizes {
  int num_k_heads = 0;
  int num_v_heads = 0;
  int k_head_dim = 0;
  int v_head_dim = 0;
  int conv_kernel = 0;
  bool tiled_heads = false;
  bool grouped_qkvz = false;
  bool grouped_ba = false;

  constexpr int key_dim() const { return num_k_heads * k_head_dim; }
  constexpr int value_dim() const { return num_v_heads * v_head_dim; }
  constexpr int conv_dim() const { return 2 * key_dim() + value_dim(); }
  constexpr int proj_dim() const { return conv_dim() + value_dim(); }  // [q|k|v | z]
  constexpr int key_head_of(int v_head) const {
    return tiled_heads ? v_head % num_k_heads : v_head / (num_v_heads / num_k_heads);
  }
};

}  // namespace cbatch
