// The block code of the causal depthwise convolution that the short conv (LFM2, short_conv.cu) and Mamba-2
// (mamba2.cu) layers share: a thread per channel walks its sequence's rows in token order over the rolling
// conv window of the sequence's state slot ((kernel - 1, channels) fp32, oldest first, as the CPU's
// cpu_recurrent.cpp keeps it). Each kind supplies how a channel's input is read and its output written (small
// functors), so that the gating around the conv stays in the same pass. No CUDA header of its own: include it
// after cuda_dtype.cuh, or on the host after tests/cuda/block_emulator.hpp (the emulated tests).
#pragma once
#include <cmath>
#include <cstdint>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch::recurrent_detail {

using deltanet_detail::kMaxConvKernel;
using RecurrentSeqs = deltanet_detail::DeltaNetSeqs;      // rows, real rows and state slot per sequence
using RecurrentStates = deltanet_detail::DeltaNetStates;  // a layer's conv windows and matrices per slot

constexpr int kConvThreads = 128;

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu_f(float x) { return x * sigmoid_f(x); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// A conv's weights and windows: taps (channels, kernel) fp32, the oldest input's tap first; bias (channels)
// or null; SiLU of the sum or not; the windows of every slot, slot s's at windows + s * window_stride.
struct ConvParams {
  const float* taps = nullptr;
  const float* bias = nullptr;
  int channels = 0;
  int kernel = 0;
  bool silu = false;
  float* windows = nullptr;
  int64_t window_stride = 0;
};

// Block (sequence blockIdx.x, channels from blockIdx.y * blockDim.x), a thread per channel c:
// out(r, c, act(sum_j taps[c][j] history[j] + bias[c])) for the sequence's rows r in order, history the window
// then the rows' in(r, c). The window becomes the last kernel - 1 real inputs (padding rows, which come last,
// are computed but leave it as it was). The sum runs over the taps in order, then the bias, as on the CPU.
template <typename Input, typename Output>
__device__ __forceinline__ void causal_conv_block(const Input& in, const Output& out, const ConvParams& p,
                                                  const RecurrentSeqs& seqs) {
  const int s = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
  const int channels = p.channels, kernel = p.kernel, width = kernel - 1;
  if (c >= channels) return;
  const int begin = seqs.begin[s], count = seqs.begin[s + 1] - begin, real = seqs.real[s];
  if (count == 0) return;
  float* window = p.windows + static_cast<int64_t>(seqs.slot[s]) * p.window_stride;
  float history[kMaxConvKernel];  // history[j]: the input width - j rows before the current one
  float tap[kMaxConvKernel];
  for (int j = 0; j < kernel; ++j) tap[j] = p.taps[static_cast<int64_t>(c) * kernel + j];
  for (int j = 0; j < width; ++j) history[j] = window[static_cast<int64_t>(j) * channels + c];
  const float bias = p.bias != nullptr ? p.bias[c] : 0.0f;
  for (int t = 0; t < count; ++t) {
    const int64_t r = begin + t;
    history[width] = in(r, c);
    float acc = 0.0f;
    for (int j = 0; j < kernel; ++j) acc += tap[j] * history[j];
    if (p.bias != nullptr) acc += bias;
    out(r, c, p.silu ? silu_f(acc) : acc);
    for (int j = 0; j < width; ++j) history[j] = history[j + 1];
    if (t == real - 1) {
      for (int j = 0; j < width; ++j) window[static_cast<int64_t>(j) * channels + c] = history[j];
    }
  }
}

}  // namespace cbatch::recurrent_detail
