// A batch for the gated DeltaNet kernels (deltanet.hpp) and its float64 reference, written here from the
// formulas (those of the CPU's cpu_deltanet.cpp and of tests/e2e/hybrid_reference.py): conv with its window,
// q/k L2 norms, beta and the decay, the delta rule per value head with key heads shared (grouped or tiled),
// the gated RMSNorm. Shared by the emulated test (test_deltanet_emulated.cpp) and the GPU one
// (test_deltanet.cpp).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch::test {

using deltanet_detail::DeltaNetDims;
using deltanet_detail::DeltaNetSeqs;
using deltanet_detail::DeltaNetStates;

// A layer's parameters, a batch of sequences (rows per sequence, real rows per sequence) and their states.
struct DeltaNetCase {
  DeltaNetDims d;
  std::vector<int32_t> begin, real, slot;
  std::vector<float> proj, ba, taps, decay, dt_bias, norm;   // proj (rows, proj_dim), ba (rows, 2 nv)
  std::vector<float> conv_state, recurrent_state;           // (slots, ...)
  int num_slots = 0;

  int num_seqs() const { return static_cast<int>(real.size()); }
  int num_rows() const { return begin.back(); }
  int64_t conv_stride() const { return static_cast<int64_t>(d.conv_kernel - 1) * d.conv_dim(); }
  int64_t recurrent_stride() const { return static_cast<int64_t>(d.num_v_heads) * d.k_head_dim * d.v_head_dim; }
};

inline DeltaNetCase make_case(const DeltaNetDims& d, const std::vector<int>& rows, const std::vector<int>& real, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, size_t n, float scale) {
    v.resize(n);
    for (float& x : v) x = scale * u(rng);
  };
  DeltaNetCase c;
  c.d = d;
  c.begin = {0};
  for (size_t s = 0; s < rows.size(); ++s) {
    c.begin.push_back(c.begin.back() + rows[s]);
    c.real.push_back(real[s]);
    c.slot.push_back(static_cast<int32_t>(rows.size() - s));  // not in batch order; slot 0 stays unused
  }
  c.num_slots = static_cast<int>(rows.size()) + 1;
  const size_t n = static_cast<size_t>(c.num_rows());
  fill(c.proj, n * d.proj_dim(), 1.0f);
  fill(c.ba, n * 2 * d.num_v_heads, 2.0f);
  fill(c.taps, static_cast<size_t>(d.conv_dim()) * d.conv_kernel, 0.6f);
  c.decay.resize(d.num_v_heads);
  for (float& a : c.decay) a = -std::exp(u(rng));  // A = -exp(A_log)
  fill(c.dt_bias, d.num_v_heads, 0.5f);
  c.norm.resize(d.v_head_dim);
  for (float& w : c.norm) w = 1.0f + 0.3f * u(rng);
  fill(c.conv_state, c.num_slots * c.conv_stride(), 1.0f);
  fill(c.recurrent_state, c.num_slots * c.recurrent_stride(), 0.3f);
  return c;
}

inline double deltanet_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double deltanet_softplus(double x) { return std::log1p(std::exp(x)); }

// The float64 reference: out (rows, value_dim) before the output product; the states advance in place.
inline std::vector<double> deltanet_reference(const DeltaNetCase& c, std::vector<double>& conv_state, std::vector<double>& state) {
  const DeltaNetDims& d = c.d;
  const int dk = d.k_head_dim, dv = d.v_head_dim, nv = d.num_v_heads, K = d.conv_kernel;
  std::vector<double> out(static_cast<size_t>(c.num_rows()) * d.value_dim());
  for (int s = 0; s < c.num_seqs(); ++s) {
    double* window = &conv_state[c.slot[s] * c.conv_stride()];
    double* S_seq = &state[c.slot[s] * c.recurrent_stride()];
    std::vector<double> window_copy(window, window + c.conv_stride());
    std::vector<double> S_copy(S_seq, S_seq + c.recurrent_stride());
    for (int t = 0; t < c.begin[s + 1] - c.begin[s]; ++t) {
      const bool padding = t >= c.real[s];
      double* win = padding ? window_copy.data() : window;
      double* S_all = padding ? S_copy.data() : S_seq;
      if (t == c.real[s]) {  // padding rows run on copies of the state after the real rows
        std::copy(window, window + c.conv_stride(), window_copy.begin());
        std::copy(S_seq, S_seq + c.recurrent_stride(), S_copy.begin());
      }
      const int r = c.begin[s] + t;
      const float* p = &c.proj[static_cast<size_t>(r) * d.proj_dim()];
      std::vector<double> x(d.conv_dim());
      for (int ch = 0; ch < d.conv_dim(); ++ch) {
        double acc = c.taps[ch * K + K - 1] * static_cast<double>(p[ch]);
        for (int j = 0; j < K - 1; ++j) acc += c.taps[ch * K + j] * win[j * d.conv_dim() + ch];
        x[ch] = acc * deltanet_sigmoid(acc);
        for (int j = 0; j < K - 2; ++j) win[j * d.conv_dim() + ch] = win[(j + 1) * d.conv_dim() + ch];
        if (K > 1) win[(K - 2) * d.conv_dim() + ch] = p[ch];
      }
      for (int h = 0; h < 2 * d.num_k_heads; ++h) {
        double sum = 0;
        for (int i = 0; i < dk; ++i) sum += x[h * dk + i] * x[h * dk + i];
        const double scale = (h < d.num_k_heads ? 1.0 / std::sqrt(dk) : 1.0) / std::sqrt(sum + 1e-6);
        for (int i = 0; i < dk; ++i) x[h * dk + i] *= scale;
      }
      for (int h = 0; h < nv; ++h) {
        const float* b = &c.ba[static_cast<size_t>(r) * 2 * nv];
        const double beta = deltanet_sigmoid(b[h]), g = std::exp(c.decay[h] * deltanet_softplus(b[nv + h] + c.dt_bias[h]));
        const int kh = d.key_head_of(h);
        const double* q = &x[kh * dk];
        const double* k = &x[d.key_dim() + kh * dk];
        const double* v = &x[2 * d.key_dim() + h * dv];
        double* S = S_all + static_cast<int64_t>(h) * dk * dv;
        std::vector<double> o(dv);
        for (int j = 0; j < dv; ++j) {
          double ks = 0;
          for (int i = 0; i < dk; ++i) ks += k[i] * S[i * dv + j] * g;
          const double delta = (v[j] - ks) * beta;
          for (int i = 0; i < dk; ++i) S[i * dv + j] = S[i * dv + j] * g + k[i] * delta;
          for (int i = 0; i < dk; ++i) o[j] += q[i] * S[i * dv + j];
        }
        double sum = 0;
        for (int j = 0; j < dv; ++j) sum += o[j] * o[j];
        const double inv = 1.0 / std::sqrt(sum / dv + 1e-6);
        for (int j = 0; j < dv; ++j) {
          const double z = p[d.conv_dim() + h * dv + j];
          out[static_cast<size_t>(r) * d.value_dim() + h * dv + j] = o[j] * inv * c.norm[j] * z * deltanet_sigmoid(z);
        }
      }
    }
  }
  return out;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Rows [from, to) of every sequence as a case of its own (the same states and parameters).
inline DeltaNetCase rows_of(const DeltaNetCase& c, int from, int to) {
  DeltaNetCase part = c;
  part.begin = {0};
  part.real.clear();
  part.proj.clear();
  part.ba.clear();
  const DeltaNetDims& d = c.d;
  for (int s = 0; s < c.num_seqs(); ++s) {
    const int n = c.begin[s + 1] - c.begin[s], lo = std::min(from, n), hi = std::min(to, n);
    part.begin.push_back(part.begin.back() + hi - lo);
    part.real.push_back(std::clamp(c.real[s] - lo, 0, hi - lo));
    for (int t = lo; t < hi; ++t) {
      const size_t r = static_cast<size_t>(c.begin[s] + t);
      part.proj.insert(part.proj.end(), c.proj.begin() + r * d.proj_dim(), c.proj.begin() + (r + 1) * d.proj_dim());
      part.ba.insert(part.ba.end(), c.ba.begin() + r * 2 * d.num_v_heads, c.ba.begin() + (r + 1) * 2 * d.num_v_heads);
    }
  }
  return part;
}

// Checks run (a function of a case and its two state vectors, advancing them, returning the outputs) against
// the reference within tolerance (relative to values of order 1), and split over two steps against itself,
// bit for bit. round (when given) rounds the projections first to what the kernels' element type holds, so
// that the reference reads the values they read.
template <typename Run>
void check_deltanet_case(const DeltaNetDims& d, uint32_t seed, Run run, double tolerance,
                         float (*round)(float) = nullptr) {
  // Three sequences: a prefill of 9 rows, a decode row, 6 rows of which the last 2 are padding.
  DeltaNetCase c = make_case(d, {9, 1, 6}, {9, 1, 4}, seed);
  if (round != nullptr) {
    for (float& x : c.proj) x = round(x);
    for (float& x : c.ba) x = round(x);
  }
  std::vector<double> conv_ref(c.conv_state.begin(), c.conv_state.end());
  std::vector<double> state_ref(c.recurrent_state.begin(), c.recurrent_state.end());
  const std::vector<double> expected = deltanet_reference(c, conv_ref, state_ref);
  std::vector<float> conv_state = c.conv_state, state = c.recurrent_state;
  const std::vector<float> out = run(c, conv_state, state);
  CHECK(max_abs_diff(out, expected) < tolerance);
  CHECK(max_abs_diff(conv_state, conv_ref) == 0.0);  // the window is inputs, copied
  CHECK(max_abs_diff(state, state_ref) < tolerance);

  // The same rows in two steps (split inside the prefill and at the padding) leave the same state and give
  // the same outputs, bit for bit.
  const DeltaNetCase first = rows_of(c, 0, 4), second = rows_of(c, 4, 9);
  std::vector<float> conv_split = c.conv_state, state_split = c.recurrent_state;
  const std::vector<float> out_first = run(first, conv_split, state_split);
  const std::vector<float> out_second = run(second, conv_split, state_split);
  CHECK(conv_split == conv_state);
  CHECK(state_split == state);
  for (int s = 0; s < c.num_seqs(); ++s) {
    for (int t = 0; t < c.begin[s + 1] - c.begin[s]; ++t) {
      const DeltaNetCase& part = t < 4 ? first : second;
      const std::vector<float>& part_out = t < 4 ? out_first : out_second;
      const int pr = part.begin[s] + (t < 4 ? t : t - 4), r = c.begin[s] + t;
      for (int i = 0; i < d.value_dim(); ++i) {
        REQUIRE(part_out[static_cast<size_t>(pr) * d.value_dim() + i] == out[static_cast<size_t>(r) * d.value_dim() + i]);
      }
    }
  }
}

}  // namespace cbatch::test
