// A gated DeltaNet layer for its kernels (deltanet.hpp): the layer's sizes and parameters, a batch of
// projection rows [q|k|v | z] with their [b | a] rows beside them (recurrent_case.hpp) and the float64
// reference written from the formulas (those of the CPU's cpu_deltanet.cpp and tests/e2e/hybrid_reference.py):
// conv with its window, q/k L2 norms, beta and the decay, the delta rule per value head with key heads shared
// (grouped or tiled), the gated RMSNorm. Shared by the emulated test (test_deltanet_emulated.cpp) and the GPU
// one (test_deltanet.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/cuda/recurrent_case.hpp"

namespace cbatch::test {

using deltanet_detail::DeltaNetSeqs;
using deltanet_detail::DeltaNetStates;

struct DeltaNetCase {
  DeltaNetSizes d;
  std::vector<float> taps, decay, dt_bias, norm;  // (conv_dim, conv_kernel); (num_v_heads) A and dt_bias; (v_head_dim)
  RecurrentCase batch;  // inputs (rows, proj_dim), side (rows, 2 num_v_heads) [b | a]; states: windows
                        // (conv_kernel - 1, conv_dim), then (num_v_heads, k_head_dim, v_head_dim)
};

// Sequences of rows[s] rows, real[s] of them real; A = -exp(A_log), A_log uniform in [-1, 1] + log_a_shift
// (a shift of -9: decay factors near 1; +4: near 0).
inline DeltaNetCase make_deltanet_case(const DeltaNetSizes& d, uint32_t seed, const std::vector<int>& rows,
                                       const std::vector<int>& real, float log_a_shift = 0.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  DeltaNetCase c;
  c.d = d;
  fill_uniform(rng, c.taps, static_cast<size_t>(d.conv_dim()) * d.conv_kernel, 0.6f);
  c.decay.resize(d.num_v_heads);
  for (float& a : c.decay) a = -std::exp(u(rng) + log_a_shift);
  fill_uniform(rng, c.dt_bias, d.num_v_heads, 0.5f);
  c.norm.resize(d.v_head_dim);
  for (float& w : c.norm) w = 1.0f + 0.3f * u(rng);
  c.batch = make_recurrent_case(rows, real, d.proj_dim(), static_cast<int64_t>(d.conv_kernel - 1) * d.conv_dim(),
                                static_cast<int64_t>(d.num_v_heads) * d.k_head_dim * d.v_head_dim, rng,
                                2 * d.num_v_heads, 2.0f);
  return c;
}

// Three sequences: a prefill of 9 rows, a decode row, 6 rows of which the last 2 are padding.
inline DeltaNetCase make_deltanet_case(const DeltaNetSizes& d, uint32_t seed) {
  return make_deltanet_case(d, seed, {9, 1, 6}, {9, 1, 4});
}

inline double deltanet_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double deltanet_softplus(double x) { return std::log1p(std::exp(x)); }

// The float64 reference: out (rows, value_dim) before the output product; the states advance in place; core
// (when given) gets the delta rule's outputs (rows, value_dim) before the norm.
inline std::vector<double> deltanet_reference(const DeltaNetCase& dc, const RecurrentCase& c, std::vector<double>& conv,
                                              std::vector<double>& rec, std::vector<double>* core = nullptr) {
  const DeltaNetSizes& d = dc.d;
  const int dk = d.k_head_dim, dv = d.v_head_dim, nv = d.num_v_heads;
  std::vector<double> out(static_cast<size_t>(c.num_rows()) * d.value_dim()), in(d.conv_dim()), x(d.conv_dim());
  if (core != nullptr) core->assign(out.size(), 0.0);
  for (int s = 0; s < c.num_seqs(); ++s) {
    reference_rows(c, s, conv, rec, [&](int r, double* window, double* state) {
      const float* p = &c.inputs[static_cast<size_t>(r) * d.proj_dim()];
      for (int ch = 0; ch < d.conv_dim(); ++ch) in[ch] = p[ch];
      reference_conv_step(in.data(), dc.taps, nullptr, d.conv_dim(), d.conv_kernel, window, x.data());
      for (double& v : x) v *= deltanet_sigmoid(v);
      for (int h = 0; h < 2 * d.num_k_heads; ++h) {
        double sum = 0;
        for (int i = 0; i < dk; ++i) sum += x[h * dk + i] * x[h * dk + i];
        const double scale = (h < d.num_k_heads ? 1.0 / std::sqrt(dk) : 1.0) / std::sqrt(sum + 1e-6);
        for (int i = 0; i < dk; ++i) x[h * dk + i] *= scale;
      }
      const float* b = &c.side[static_cast<size_t>(r) * 2 * nv];
      for (int h = 0; h < nv; ++h) {
        const double beta = deltanet_sigmoid(b[h]), g = std::exp(dc.decay[h] * deltanet_softplus(b[nv + h] + dc.dt_bias[h]));
        const int kh = d.key_head_of(h);
        const double* q = &x[kh * dk];
        const double* k = &x[d.key_dim() + kh * dk];
        const double* v = &x[2 * d.key_dim() + h * dv];
        double* S = state + static_cast<int64_t>(h) * dk * dv;
        std::vector<double> o(dv);
        for (int j = 0; j < dv; ++j) {
          double ks = 0;
          for (int i = 0; i < dk; ++i) ks += k[i] * S[i * dv + j] * g;
          const double delta = (v[j] - ks) * beta;
          for (int i = 0; i < dk; ++i) S[i * dv + j] = S[i * dv + j] * g + k[i] * delta;
          for (int i = 0; i < dk; ++i) o[j] += q[i] * S[i * dv + j];
        }
        if (core != nullptr) std::copy(o.begin(), o.end(), core->begin() + static_cast<int64_t>(r) * d.value_dim() + h * dv);
        double sum = 0;
        for (int j = 0; j < dv; ++j) sum += o[j] * o[j];
        const double inv = 1.0 / std::sqrt(sum / dv + 1e-6);
        for (int j = 0; j < dv; ++j) {
          const double z = p[d.conv_dim() + h * dv + j];
          out[static_cast<size_t>(r) * d.value_dim() + h * dv + j] = o[j] * inv * dc.norm[j] * z * deltanet_sigmoid(z);
        }
      }
    });
  }
  return out;
}

// Checks run (a function of the case, a batch and its two state vectors, advancing them, returning the outputs)
// on check_recurrent_case's terms, the windows exactly (they hold the inputs). round (when given) rounds the
// projections first to what the kernels' element type holds, so that the reference reads the values they read.
template <typename Run>
void check_deltanet_case(const DeltaNetSizes& d, uint32_t seed, Run run, double tolerance,
                         float (*round)(float) = nullptr) {
  DeltaNetCase dc = make_deltanet_case(d, seed);
  if (round != nullptr) {
    for (float& x : dc.batch.inputs) x = round(x);
    for (float& x : dc.batch.side) x = round(x);
  }
  check_recurrent_case(
      dc.batch, d.value_dim(),
      [&](const RecurrentCase& c, std::vector<float>& conv, std::vector<float>& rec) { return run(dc, c, conv, rec); },
      [&](const RecurrentCase& c, std::vector<double>& conv, std::vector<double>& rec) {
        return deltanet_reference(dc, c, conv, rec);
      },
      tolerance, true);
}

// The delta rule's outputs before the norm (core) and the layer's after it (out), (rows, value_dim) each.
struct DeltaNetOutputs {
  std::vector<float> core, out;
};

// Runs of 1, C - 1, C, C + 1 and 3C + 5 rows, a decode row, C + 6 rows of which the last 3 are padding: the
// chunked delta rule's batch, C = kDeltaNetChunk.
inline DeltaNetCase make_chunked_deltanet_case(const DeltaNetSizes& d, uint32_t seed, float log_a_shift = 0.0f) {
  constexpr int C = deltanet_detail::kDeltaNetChunk;
  return make_deltanet_case(d, seed, {1, C - 1, C, C + 1, 3 * C + 5, 1, C + 6}, {1, C - 1, C, C + 1, 3 * C + 5, 1, C + 3},
                            log_a_shift);
}

// The layer's sizes, conv kernel 4.
inline DeltaNetSizes deltanet_dims(int nk, int nv, int dk, int dv, bool tiled) {
  DeltaNetSizes d;
  d.num_k_heads = nk;
  d.num_v_heads = nv;
  d.k_head_dim = dk;
  d.v_head_dim = dv;
  d.conv_kernel = 4;
  d.tiled_heads = tiled;
  return d;
}

// The chunked delta rule on the case's rows (sequences of at least min_chunk_rows real rows) against the
// float64 reference and the token-by-token kernel, outputs before and after the norm and the final states;
// then the rows split over two steps (the second continuing the first's states) against the reference.
// run(case, batch, conv_state, state, min_chunk_rows) -> DeltaNetOutputs, the states advanced in place;
// min_chunk_rows 0: every sequence token by token.
template <typename Run>
void check_chunked_deltanet_case(const DeltaNetCase& dc, Run run, int min_chunk_rows, double tolerance) {
  const RecurrentCase& c = dc.batch;
  std::vector<double> conv_ref(c.conv_state.begin(), c.conv_state.end());
  std::vector<double> state_ref(c.recurrent_state.begin(), c.recurrent_state.end()), core_ref;
  const std::vector<double> out_ref = deltanet_reference(dc, c, conv_ref, state_ref, &core_ref);
  std::vector<float> conv = c.conv_state, state = c.recurrent_state;
  const DeltaNetOutputs chunked = run(dc, c, conv, state, min_chunk_rows);
  CHECK(largest_diff(chunked.core, core_ref) < tolerance);
  CHECK(largest_diff(chunked.out, out_ref) < 10 * tolerance);  // normed: values of order 1
  CHECK(largest_diff(conv, conv_ref) == 0.0);
  CHECK(largest_diff(state, state_ref) < tolerance);
  std::vector<float> conv_token = c.conv_state, state_token = c.recurrent_state;
  const DeltaNetOutputs token = run(dc, c, conv_token, state_token, 0);
  const std::vector<double> core_token(token.core.begin(), token.core.end());
  const std::vector<double> state_token_d(state_token.begin(), state_token.end());
  CHECK(largest_diff(chunked.core, core_token) < tolerance);
  CHECK(largest_diff(state, state_token_d) < tolerance);

  const int split = deltanet_detail::kDeltaNetChunk + 6;
  const RecurrentCase first = rows_of(c, 0, split), second = rows_of(c, split, 1 << 20);
  std::vector<float> conv_split = c.conv_state, state_split = c.recurrent_state;
  const DeltaNetOutputs out_first = run(dc, first, conv_split, state_split, min_chunk_rows);
  const DeltaNetOutputs out_second = run(dc, second, conv_split, state_split, min_chunk_rows);
  CHECK(largest_diff(state_split, state_ref) < tolerance);
  const int width = dc.d.value_dim();
  double split_diff = 0;
  for (int s = 0; s < c.num_seqs(); ++s) {
    for (int t = 0; t < c.begin[s + 1] - c.begin[s]; ++t) {
      const RecurrentCase& part = t < split ? first : second;
      const std::vector<float>& part_core = t < split ? out_first.core : out_second.core;
      const size_t pr = static_cast<size_t>(part.begin[s] + (t < split ? t : t - split));
      const size_t r = static_cast<size_t>(c.begin[s] + t);
      for (int i = 0; i < width; ++i) {
        split_diff = std::max(split_diff, std::abs(part_core[pr * width + i] - core_ref[r * width + i]));
      }
    }
  }
  CHECK(split_diff < tolerance);
}

}  // namespace cbatch::test
