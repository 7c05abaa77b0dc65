// The sizes a Mamba-2 layer's kernels (mamba2.hpp, mamba2_block.cuh) share with the backend that fills
// them: Mamba2Sizes (model_config.hpp) in a struct device code may read (constexpr methods,
// --expt-relaxed-constexpr). The in projection's rows are [z (inner) | x (inner) | B (groups * state) |
// C (groups * state) | dt (heads)]; the conv mixes x|B|C; head h reads B and C of group h / (heads / groups).
#pragma once

namespace cbatch::recurrent_detail {

struct Mamba2Dims {
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

}  // namespace cbatch::recurrent_detail
