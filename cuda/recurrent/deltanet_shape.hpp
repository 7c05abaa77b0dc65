// The sizes and layouts the gated DeltaNet kernels share with their launcher (deltanet.hpp) and the backend
// that fills them, apart from the block code (deltanet_block.cuh) so that host files can include them. The
// methods are constexpr so that device code may call them (--expt-relaxed-constexpr).
#pragma once
#include <cstdint>

namespace cbatch::deltanet_detail {

constexpr int kMaxConvKernel = 8;  // taps a conv may have (Qwen3.5: 4)

// The sizes of a layer (DeltaNetSizes, without the file layouts the loader has already undone).
struct DeltaNetDims {
  int num_k_heads = 0;
  int num_v_heads = 0;
  int k_head_dim = 0;
  int v_head_dim = 0;
  int conv_kernel = 0;
  bool tiled_heads = false;  // value head h reads key head h % num_k_heads (else h / (num_v_heads / num_k_heads))

  constexpr int key_dim() const { return num_k_heads * k_head_dim; }
  constexpr int value_dim() const { return num_v_heads * v_head_dim; }
  constexpr int conv_dim() const { return 2 * key_dim() + value_dim(); }
  constexpr int proj_dim() const { return conv_dim() + value_dim(); }  // [q|k|v | z]
  constexpr int key_head_of(int v_head) const {
    return tiled_heads ? v_head % num_k_heads : v_head / (num_v_heads / num_k_heads);
  }
};

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
