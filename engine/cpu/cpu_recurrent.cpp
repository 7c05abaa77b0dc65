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
  for (int t = 0; t < rows.count; ++t) {
    float* o = out + static_cast<int64_t>(t) * out_stride;
    for (int c = 0; c < channels; ++c) {
      float acc = 0.0f;
      for (int j = 0; j < kernel; ++j) acc += conv.taps[c * kernel + j] * history[static_cast<int64_t>(t + j) * channels + c];
      if (conv.bias != nullptr) acc += conv.bias[c];
      o[c] = conv.silu ? silu(acc) : acc;
    }
  }
  std::copy_n(history + static_cast<int64_t>(rows.real) * channels, static_cast<int64_t>(width) * channels, window);
}

}  // namespace cbatch
