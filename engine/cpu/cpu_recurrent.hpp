// What the CPU backend's recurrent layer kinds share (cpu_deltanet.cpp, cpu_short_conv.cpp, cpu_mamba2.cpp):
// a sequence's rows in the batch, a thread's scratch, and the causal depthwise convolution over a sequence's
// rows with its rolling window. Every value is computed from its own sequence's rows in token order, so a
// prompt prefilled in chunks leaves the same window, bit for bit, as one prefilled whole.
#pragma once
#include <cstdint>

#include "engine/backend/ragged_batch.hpp"

namespace cbatch {

// Rows [begin, begin + count) of sequence s in the batch, and how many of them are real (padding rows,
// slot_mapping -1 in static mode, come last and leave the sequence's state as it was).
struct SeqRows {
  int begin = 0;
  int count = 0;
  int real = 0;
};
SeqRows seq_rows(const RaggedBatch& batch, int s);

// The calling thread's scratch, at least `count` floats (grown, then reused).
float* scratch_floats(int64_t count);

// A causal depthwise convolution's weights: taps (channels, kernel) row-major, the oldest input's tap first;
// bias (channels) or nullptr; SiLU of the sum or not.
struct ConvTaps {
  const float* taps = nullptr;
  const float* bias = nullptr;
  int channels = 0;
  int kernel = 0;
  bool silu = false;
};

// The conv of one sequence's rows: in (count, in_stride) inputs, window (kernel - 1, channels) the inputs
// before them, oldest first; out (count, out_stride) (out may be in: the inputs are read first). The window
// becomes the last kernel - 1 real inputs.
void causal_conv(const float* in, int64_t in_stride, const SeqRows& rows, const ConvTaps& conv, float* window,
                 float* out, int64_t out_stride);

float sigmoid(float x);
float silu(float x);
float softplus(float x);  // log(1 + e^x), x itself past 20

}  // namespace cbatch
