// LFM2's short convolution for its kernel (short_conv.hpp): the layer's sizes and taps, a batch of in
// projection rows [B | C | x] (recurrent_case.hpp) and the float64 reference written from the formulas (those of
// the CPU's cpu_short_conv.cpp and tests/e2e/hybrid_reference.py): out = C * conv(B * x), the window holding
// earlier B * x. Shared by the emulated test (test_short_conv_emulated.cpp) and the GPU one (test_short_conv.cpp).
#pragma once
#include <random>
#include <vector>

#include "tests/cuda/recurrent_case.hpp"

namespace cbatch::test {

struct ShortConvCase {
  int dim = 0;
  int kernel = 0;
  std::vector<float> taps;  // (dim, kernel)
  RecurrentCase batch;      // inputs (rows, 3 dim); states: windows (kernel - 1, dim), no matrices
};

inline ShortConvCase make_short_conv_case(int dim, int kernel, uint32_t seed) {
  std::mt19937 rng(seed);
  ShortConvCase c;
  c.dim = dim;
  c.kernel = kernel;
  fill_uniform(rng, c.taps, static_cast<size_t>(dim) * kernel, 0.6f);
  c.batch = make_recurrent_case({9, 1, 6}, {9, 1, 4}, 3 * dim, static_cast<int64_t>(kernel - 1) * dim, 0, rng);
  return c;
}

// The reference's outputs (rows, dim); the windows advance in place.
inline std::vector<double> short_conv_reference(const ShortConvCase& sc, const RecurrentCase& c,
                                                std::vector<double>& conv, std::vector<double>& rec) {
  const int dim = sc.dim;
  std::vector<double> out(static_cast<size_t>(c.num_rows()) * dim), bx(dim), y(dim);
  for (int s = 0; s < c.num_seqs(); ++s) {
    reference_rows(c, s, conv, rec, [&](int r, double* window, double*) {
      const float* row = &c.inputs[static_cast<size_t>(r) * 3 * dim];
      for (int i = 0; i < dim; ++i) bx[i] = static_cast<double>(row[i]) * row[2 * dim + i];
      reference_conv_step(bx.data(), sc.taps, nullptr, dim, sc.kernel, window, y.data());
      for (int i = 0; i < dim; ++i) out[static_cast<size_t>(r) * dim + i] = y[i] * row[dim + i];
    });
  }
  return out;
}

}  // namespace cbatch::test
