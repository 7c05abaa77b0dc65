// The layouts the recurrent kernels (deltanet.hpp, short_conv.hpp, mamba2.hpp) share with the backend that fills
// them, apart from the block code so that host files can include them: the step's sequences and a layer's
// state slots. The layers' sizes are the engine's own (engine/model/recurrent_sizes.hpp: DeltaNetSizes,
// Mamba2Sizes), read on the device as they are.
#pragma once
#include <cstdint>

#include "engine/model/recurrent_sizes.hpp"

namespace cbatch::deltanet_detail {

constexpr int kMaxConvKernel = 8;  // taps a conv may have (Qwen3.5: 4)

// The step's sequences: rows [begin[s], begin[s + 1]), of which the first real[s] are real (padding rows
// come last: they are computed from the state but leave it as it was); slot[s] is the sequence's state slot.
struct DeltaNetSeqs {
  const int32_t* begin = nullptr;  // (num_seqs + 1)
  const int32_t* real = nullptr;   // (num_seqs)
  const int32_t* slot = nullptr;   // (num_seqs)
};

// A layer's states: slot s's conv window at conv + s * conv_stride ((conv_kernel - 1, conv_dim), oldest
// first) and its recurrent matrices at recurrent + s * recurrent_stride ((num_v_heads, k_head_dim,
// v_head_dim)).
struct DeltaNetStates {
  float* conv = nullptr;
  float* recurrent = nullptr;
  int64_t conv_stride = 0;
  int64_t recurrent_stride = 0;
};

}  // namespace cbatch::deltanet_detail
