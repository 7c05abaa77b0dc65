// A Mamba-2 layer for its kernels (mamba2.hpp): the layer's sizes and parameters, a batch of in projection
// rows [z | x|B|C | dt] (recurrent_case.hpp) and the float64 reference written from the formulas (those of the
// CPU's cpu_mamba2.cpp and tests/e2e/hybrid_reference.py): the conv with its bias and SiLU over x|B|C, dt =
// clamp(softplus(dt + dt_bias)), the selective scan per head with grouped B and C and the D skip, the gated
// grouped RMSNorm. Shared by the emulated test (test_mamba2_emulated.cpp) and the GPU one (test_mamba2.cpp).
#pragma once
#include <cmath>
#include <random>
#include <vector>

#include "engine/model/recurrent_sizes.hpp"
#include "tests/cuda/recurrent_case.hpp"

namespace cbatch::test {

struct Mamba2Case {
  Mamba2Sizes d;
  std::vector<float> taps, conv_bias;     // (conv_dim, conv_kernel), (conv_dim)
  std::vector<float> decay, dt_bias, skip;  // (heads) each: A (negative), dt_bias, D
  std::vector<float> norm;                // (inner)
  RecurrentCase batch;  // inputs (rows, in_proj_dim); states: windows (conv_kernel - 1, conv_dim), then
                        // (heads, head_dim, state_size)
};

// rows[s] rows of sequence s, real[s] of them real (recurrent_case.hpp's batch by default).
inline Mamba2Case make_mamba2_case(const Mamba2Sizes& d, uint32_t seed, const std::vector<int>& rows = {9, 1, 6},
                                   const std::vector<int>& real = {9, 1, 4}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Mamba2Case c;
  c.d = d;
  fill_uniform(rng, c.taps, static_cast<size_t>(d.conv_dim()) * d.conv_kernel, 0.6f);
  fill_uniform(rng, c.conv_bias, d.conv_dim(), 0.3f);
  c.decay.resize(d.num_heads);
  for (float& a : c.decay) a = -std::exp(u(rng));  // A = -exp(A_log)
  fill_uniform(rng, c.dt_bias, d.num_heads, 0.5f);
  fill_uniform(rng, c.skip, d.num_heads, 1.0f);
  c.norm.resize(d.inner());
  for (float& w : c.norm) w = 1.0f + 0.3f * u(rng);
  c.batch = make_recurrent_case(rows, real, d.in_proj_dim(), static_cast<int64_t>(d.conv_kernel - 1) * d.conv_dim(),
                                static_cast<int64_t>(d.inner()) * d.state_size, rng);
  return c;
}

// The reference's outputs (rows, inner), before the output product; the states advance in place.
inline std::vector<double> mamba2_reference(const Mamba2Case& mc, const RecurrentCase& c, std::vector<double>& conv,
                                            std::vector<double>& rec) {
  const Mamba2Sizes& d = mc.d;
  const int P = d.head_dim, N = d.state_size, inner = d.inner(), width = d.group_width();
  std::vector<double> out(static_cast<size_t>(c.num_rows()) * inner), in(d.conv_dim()), xbc(d.conv_dim()), y(inner);
  for (int s = 0; s < c.num_seqs(); ++s) {
    reference_rows(c, s, conv, rec, [&](int r, double* window, double* state) {
      const float* row = &c.inputs[static_cast<size_t>(r) * d.in_proj_dim()];
      for (int i = 0; i < d.conv_dim(); ++i) in[i] = row[inner + i];
      reference_conv_step(in.data(), mc.taps, mc.conv_bias.data(), d.conv_dim(), d.conv_kernel, window, xbc.data());
      for (double& v : xbc) v = v / (1.0 + std::exp(-v));
      for (int h = 0; h < d.num_heads; ++h) {
        double dt = std::log1p(std::exp(static_cast<double>(row[inner + d.conv_dim() + h]) + mc.dt_bias[h]));
        dt = std::max(dt, static_cast<double>(d.dt_min));
        if (d.dt_max > 0.0f) dt = std::min(dt, static_cast<double>(d.dt_max));
        const double factor = std::exp(dt * mc.decay[h]);
        const int g = d.group_of(h);
        const double* b = &xbc[inner + g * N];
        const double* cc = &xbc[inner + d.num_groups * N + g * N];
        for (int p = 0; p < P; ++p) {
          const double x = xbc[h * P + p];
          double* S = state + (static_cast<int64_t>(h) * P + p) * N;
          double acc = 0;
          for (int n = 0; n < N; ++n) {
            S[n] = S[n] * factor + dt * x * b[n];
            acc += S[n] * cc[n];
          }
          y[h * P + p] = acc + mc.skip[h] * x;
        }
      }
      for (int g = 0; g < d.num_groups; ++g) {
        double sum = 0;
        for (int i = g * width; i < (g + 1) * width; ++i) {
          const double z = row[i];
          y[i] *= z / (1.0 + std::exp(-z));
          sum += y[i] * y[i];
        }
        const double inv = 1.0 / std::sqrt(sum / width + 1e-6);
        for (int i = g * width; i < (g + 1) * width; ++i) out[static_cast<size_t>(r) * inner + i] = y[i] * inv * mc.norm[i];
      }
    });
  }
  return out;
}

}  // namespace cbatch::test
