// A step's batch for a recurrent layer kind's kernels (gated DeltaNet, short conv, Mamba-2: deltanet_case.hpp,
// short_conv_case.hpp, mamba2_case.hpp) and the checks every kind's kernels pass: against a float64 reference within a tolerance,
// and the same rows split over two steps leaving the same states and outputs bit for bit. Three sequences
// at different positions share the batch (a prefill of 9 rows, a decode row, 6 rows of which the last 2 are
// padding, as static mode pads), their states start non-zero and sit in slots out of batch order.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch::test {

// The rows (rows, in_width) of a step, its sequences and every slot's states (conv windows, matrices).
struct RecurrentCase {
  std::vector<int32_t> begin, real, slot;  // (num_seqs + 1), (num_seqs), (num_seqs)
  int in_width = 0, side_width = 0;
  std::vector<float> inputs;  // (rows, in_width): the in projection's rows
  std::vector<float> side;    // (rows, side_width): a second projection's rows (DeltaNet's [b | a]), or none
  int64_t conv_stride = 0, recurrent_stride = 0;
  std::vector<float> conv_state, recurrent_state;  // (slots, conv_stride), (slots, recurrent_stride)

  int num_seqs() const { return static_cast<int>(real.size()); }
  int num_rows() const { return begin.back(); }
  deltanet_detail::DeltaNetSeqs seqs() const { return {begin.data(), real.data(), slot.data()}; }
};

inline void fill_uniform(std::mt19937& rng, std::vector<float>& v, size_t n, float scale) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  v.resize(n);
  for (float& x : v) x = scale * u(rng);
}

// Sequences of rows[s] rows, real[s] of them real; random inputs (side inputs of side_width values, times
// side_scale) and states.
inline RecurrentCase make_recurrent_case(const std::vector<int>& rows, const std::vector<int>& real, int in_width,
                                         int64_t conv_stride, int64_t recurrent_stride, std::mt19937& rng,
                                         int side_width = 0, float side_scale = 1.0f) {
  RecurrentCase c;
  c.begin = {0};
  for (size_t s = 0; s < rows.size(); ++s) {
    c.begin.push_back(c.begin.back() + rows[s]);
    c.real.push_back(real[s]);
    c.slot.push_back(static_cast<int32_t>(rows.size() - s));  // not in batch order; slot 0 stays unused
  }
  c.in_width = in_width;
  c.conv_stride = conv_stride;
  c.recurrent_stride = recurrent_stride;
  const size_t slots = rows.size() + 1;
  c.side_width = side_width;
  fill_uniform(rng, c.inputs, static_cast<size_t>(c.num_rows()) * in_width, 1.0f);
  fill_uniform(rng, c.side, static_cast<size_t>(c.num_rows()) * side_width, side_scale);
  fill_uniform(rng, c.conv_state, slots * conv_stride, 1.0f);
  fill_uniform(rng, c.recurrent_state, slots * recurrent_stride, 0.3f);
  return c;
}

// Rows [from, to) of every sequence as a step of its own (the same states).
inline RecurrentCase rows_of(const RecurrentCase& c, int from, int to) {
  RecurrentCase part = c;
  part.begin = {0};
  part.real.clear();
  part.inputs.clear();
  part.side.clear();
  for (int s = 0; s < c.num_seqs(); ++s) {
    const int n = c.begin[s + 1] - c.begin[s], lo = std::min(from, n), hi = std::min(to, n);
    part.begin.push_back(part.begin.back() + hi - lo);
    part.real.push_back(std::clamp(c.real[s] - lo, 0, hi - lo));
    const size_t w = static_cast<size_t>(c.in_width), sw = static_cast<size_t>(c.side_width);
    part.inputs.insert(part.inputs.end(), c.inputs.begin() + (c.begin[s] + lo) * w, c.inputs.begin() + (c.begin[s] + hi) * w);
    part.side.insert(part.side.end(), c.side.begin() + (c.begin[s] + lo) * sw, c.side.begin() + (c.begin[s] + hi) * sw);
  }
  return part;
}

inline double largest_diff(const std::vector<float>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// run(case, conv_state, recurrent_state) -> outputs (rows, out_width), the states advanced in place;
// reference(case, conv_state, recurrent_state) the same in float64. Checks run against the reference (values
// of order 1; with exact_windows the conv windows, which then hold inputs as they are, exactly), then the rows
// split over two steps (inside the prefill, and at the padding) against itself.
template <typename Run, typename Reference>
void check_recurrent_case(const RecurrentCase& c, int out_width, Run run, Reference reference, double tolerance,
                          bool exact_windows = false) {
  std::vector<double> conv_ref(c.conv_state.begin(), c.conv_state.end());
  std::vector<double> state_ref(c.recurrent_state.begin(), c.recurrent_state.end());
  const std::vector<double> expected = reference(c, conv_ref, state_ref);
  std::vector<float> conv_state = c.conv_state, state = c.recurrent_state;
  const std::vector<float> out = run(c, conv_state, state);
  CHECK(largest_diff(out, expected) < tolerance);
  if (exact_windows) {
    CHECK(largest_diff(conv_state, conv_ref) == 0.0);
  } else {
    CHECK(largest_diff(conv_state, conv_ref) < tolerance);
  }
  CHECK(largest_diff(state, state_ref) < tolerance);

  const RecurrentCase first = rows_of(c, 0, 4), second = rows_of(c, 4, 1 << 20);
  std::vector<float> conv_split = c.conv_state, state_split = c.recurrent_state;
  const std::vector<float> out_first = run(first, conv_split, state_split);
  const std::vector<float> out_second = run(second, conv_split, state_split);
  CHECK(conv_split == conv_state);
  CHECK(state_split == state);
  for (int s = 0; s < c.num_seqs(); ++s) {
    for (int t = 0; t < c.begin[s + 1] - c.begin[s]; ++t) {
      const RecurrentCase& part = t < 4 ? first : second;
      const std::vector<float>& part_out = t < 4 ? out_first : out_second;
      const size_t pr = static_cast<size_t>(part.begin[s] + (t < 4 ? t : t - 4)), r = static_cast<size_t>(c.begin[s] + t);
      for (int i = 0; i < out_width; ++i) REQUIRE(part_out[pr * out_width + i] == out[r * out_width + i]);
    }
  }
}

// Runs a sequence's rows through the reference: step(t, window, state) for t in order, the window and state
// being the slot's own for real rows and copies (taken after the last real row) for padding rows.
template <typename Step>
void reference_rows(const RecurrentCase& c, int s, std::vector<double>& conv, std::vector<double>& rec, Step step) {
  double* window = &conv[static_cast<size_t>(c.slot[s] * c.conv_stride)];
  double* state = &rec[static_cast<size_t>(c.slot[s] * c.recurrent_stride)];
  std::vector<double> window_copy, state_copy;
  for (int t = 0; t < c.begin[s + 1] - c.begin[s]; ++t) {
    if (t == c.real[s]) {
      window_copy.assign(window, window + c.conv_stride);
      state_copy.assign(state, state + c.recurrent_stride);
      window = window_copy.data();
      state = state_copy.data();
    }
    step(c.begin[s] + t, window, state);
  }
}

// One causal conv step in float64: out[ch] = sum_j taps[ch][j] history_j (+ bias), history the window then
// in[ch]; the window shifts by one input.
inline void reference_conv_step(const double* in, const std::vector<float>& taps, const float* bias, int channels,
                                int kernel, double* window, double* out) {
  for (int ch = 0; ch < channels; ++ch) {
    double acc = taps[static_cast<size_t>(ch) * kernel + kernel - 1] * in[ch];
    for (int j = 0; j < kernel - 1; ++j) acc += taps[static_cast<size_t>(ch) * kernel + j] * window[j * channels + ch];
    if (bias != nullptr) acc += bias[ch];
    out[ch] = acc;
    for (int j = 0; j < kernel - 2; ++j) window[j * channels + ch] = window[(j + 1) * channels + ch];
    if (kernel > 1) window[(kernel - 2) * channels + ch] = in[ch];
  }
}

}  // namespace cbatch::test
