// The recurrent kinds' shared pieces (cpu_recurrent.hpp).
#include "engine/cpu/cpu_recurrent.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cbatch {

SeqRows seq_rows(const RaggedBatch& batch, int s) {
  SeqRows rows{batch.query_start[s], batch.query_start[s + 1] - batch.query_start[s], 0};
  while (rows.real < rows.count && batch.slot_mapping[rows.begin + rows.real] >= 0) ++rows.real;
  return rows;
}

float* scratch_floats(int64_t count) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(count)) scratch.resize(static_cast<size_t>(count));
  return scratch.data();
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x * sigmoid(x); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void causal_conv(const float* in, int64_t in_stride, const SeqRows& rows, const ConvTaps& conv, float* window,
                 float* out, int64_t out_stride) {
  const int width = conv.kernel - 1, channels = conv.channels, kernel = conv.kernel;
  // (width + count, channels): the window, then the rows' inputs
  float* history = scratch_floats(static_cast<int64_t>(width + rows.count) * channels);
  std::copy_n(window, static_cast<int64_t>(width) * channels, history);
  for (int t = 0; t < rows.count; ++t) {
    std::copy_n(in + t * in_stride, channels, history + static_cast<int64_t>(width + t) * channels);
  }
  // The taps as (kernel, channels), so that the loops below run over contiguous channels (vectorized); each
  // channel's sum still adds its taps oldest first, then the bias, as one channel at a time would.
  thread_local std::vector<float> taps_by_tap;
  taps_by_tap.resize(static_cast<size_t>(kernel) * channels);
  for (int c = 0; c < channels; ++c) {
    for (int j = 0; j < kernel; ++j) taps_by_tap[static_cast<size_t>(j) * channels + c] = conv.taps[c * kernel + j];
  }
  for (int t = 0; t < rows.count; ++t) {
    float* o = out + static_cast<int64_t>(t) * out_stride;  // may be in: its row is in history already
    std::fill_n(o, channels, 0.0f);
    for (int j = 0; j < kernel; ++j) {
      const float* tap = &taps_by_tap[static_cast<size_t>(j) * channels];
      const float* x = history + static_cast<int64_t>(t + j) * channels;
      for (int c = 0; c < channels; ++c) o[c] += tap[c] * x[c];
    }
    if (conv.bias != nullptr) {
      for (int c = 0; c < channels; ++c) o[c] += conv.bias[c];
    }
    if (conv.silu) {
      for (int c = 0; c < channels; ++c) o[c] = silu(o[c]);
    }
  }
  std::copy_n(history + static_cast<int64_t>(rows.real) * channels, static_cast<int64_t>(width) * channels, window);
}

}  // namespace cbatch
