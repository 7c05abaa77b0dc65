// The block code of Gemma 4's per-layer inputs and layer tail (per_layer_input_block.cuh) run on the CPU by
// the block emulator, against float64 references written from the CPU backend's cpu_per_layer_input.cpp
// (transformers' get_per_layer_inputs / project_per_layer_inputs and the decoder layer's end): the inputs
// of every layer from the projection and the table (per-layer norms over slices wider and narrower than a
// block), the gate times a layer's slice (tanh GELU and silu), and x = (x + norm(delta)) * scalar with and
// without the delta, the scalar and the T copy. Outputs are poisoned with NaN. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/elementwise/swiglu.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/elementwise/swiglu_block.cuh"
#include "cuda/elementwise/per_layer_input_block.cuh"

namespace cbatch::test {
namespace {

constexpr float kEps = 1e-6f;

double rms_inv(const double* v, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += v[i] * v[i];
  return 1.0 / std::sqrt(s / n + kEps);
}

// per_layer_inputs on rows of random tokens: proj (rows, L p) fp32, table (vocab, L p) in T.
template <typename T>
void check_inputs_emulated(int rows, int num_layers, int p, int dim) {
  const int vocab = 11;
  const size_t all = static_cast<size_t>(num_layers) * p;
  const std::vector<float> proj = random_vector(rows * all, 31 + p, -9.0f, 9.0f);
  const std::vector<float> table = round_to<T>(random_vector(vocab * all, 32 + p, -1.0f, 1.0f));
  const std::vector<float> norm = random_vector(static_cast<size_t>(p), 33, 0.5f, 1.5f);
  std::vector<int32_t> tokens(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) tokens[static_cast<size_t>(r)] = (7 * r + 3) % vocab;

  std::vector<double> ref(rows * all);
  for (int r = 0; r < rows; ++r) {
    for (int l = 0; l < num_layers; ++l) {
      std::vector<double> v(static_cast<size_t>(p));
      for (int i = 0; i < p; ++i) v[i] = proj[r * all + l * p + i] / std::sqrt(static_cast<double>(dim));
      const double inv = rms_inv(v.data(), p);
      for (int i = 0; i < p; ++i) {
        const double tok = table[tokens[r] * all + l * p + i] * std::sqrt(static_cast<double>(p));
        ref[r * all + l * p + i] = (v[i] * inv * norm[i] + tok) / std::sqrt(2.0);
      }
    }
  }
  const std::vector<T> table_t = to_t<T>(table);
  std::vector<float> out(rows * all, NAN);
  block_emulator::launch(static_cast<unsigned>(rows), per_layer_detail::kPerLayerThreads, [&] {
    per_layer_detail::per_layer_inputs_block<T>(out.data(), proj.data(), table_t.data(), tokens.data(), norm.data(),
                                                num_layers, p, kEps, 1.0f / std::sqrt(static_cast<float>(dim)),
                                                std::sqrt(static_cast<float>(p)), 1.0f / std::sqrt(2.0f));
  });
  CHECK(rel_error(out, ref) < 1e-6);  // fp32 throughout, the table's values exact in T
}

// per_layer_gate of layer `layer` with the activation.
template <typename T>
void check_gate_emulated(int rows, int num_layers, int p, int layer, Activation activation) {
  const size_t all = static_cast<size_t>(num_layers) * p;
  const std::vector<float> gate = round_to<T>(random_vector(static_cast<size_t>(rows) * p, 41, -4.0f, 4.0f));
  const std::vector<float> inputs = random_vector(rows * all, 42, -2.0f, 2.0f);
  std::vector<double> ref(static_cast<size_t>(rows) * p);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < p; ++i) {
      const double a = gate[static_cast<size_t>(r) * p + i];
      const double act = activation == Activation::kGeluTanh
                             ? 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)))
                             : a / (1.0 + std::exp(-a));
      ref[static_cast<size_t>(r) * p + i] = act * inputs[r * all + static_cast<size_t>(layer) * p + i];
    }
  }
  std::vector<T> out = to_t<T>(gate);
  const size_t n = out.size();
  constexpr int kThreads = 64;
  block_emulator::launch(static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, [&] {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) per_layer_detail::per_layer_gate_element<T>(out.data(), inputs.data(), i, layer, num_layers, p, activation);
  });
  CHECK(rel_error(to_float_vector(out), ref) < tolerance<T>());
}

// residual_tail: x = (x + norm(delta) * w) * scale, with or without each part, and its copy in T.
template <typename T>
void check_tail_emulated(int rows, int dim, bool with_delta, bool with_scale, bool with_out) {
  const size_t n = static_cast<size_t>(rows) * dim;
  const std::vector<float> x = random_vector(n, 51 + dim, -2.0f, 2.0f);
  const std::vector<float> delta = round_to<T>(random_vector(n, 52 + dim, -30.0f, 30.0f));
  const std::vector<float> w = random_vector(static_cast<size_t>(dim), 53, 0.5f, 2.5f);
  const float scale = 0.37f;
  std::vector<double> ref(n);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> d(delta.begin() + static_cast<long>(r) * dim, delta.begin() + static_cast<long>(r + 1) * dim);
    const double inv = rms_inv(d.data(), dim);
    for (int i = 0; i < dim; ++i) {
      double v = x[static_cast<size_t>(r) * dim + i] + (with_delta ? d[i] * inv * w[i] : 0.0);
      ref[static_cast<size_t>(r) * dim + i] = v * (with_scale ? scale : 1.0);
    }
  }
  const std::vector<T> delta_t = to_t<T>(delta);
  std::vector<float> x_dev = x;
  std::vector<T> out(n, from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(rows), per_layer_detail::kPerLayerThreads, [&] {
    per_layer_detail::residual_tail_block<T>(x_dev.data(), with_delta ? delta_t.data() : nullptr, w.data(),
                                             with_scale ? &scale : nullptr, with_out ? out.data() : nullptr, dim, kEps);
  });
  CHECK(rel_error(x_dev, ref) < 1e-6);
  if (with_out) {
    CHECK(rel_error(to_float_vector(out), ref) < tolerance<T>());
  } else {
    CHECK(std::isnan(to_f32(out[0])));  // untouched
  }
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE_TEMPLATE("per-layer inputs' block code: the norm of each layer's slice plus its token's (emulated)", T,
                     float, __nv_bfloat16, __half) {
    for (int p : {8, 256, 300}) {
      CAPTURE(p);
      check_inputs_emulated<T>(3, 4, p, 64);
    }
  }

  TEST_CASE_TEMPLATE("per-layer gate's element code: act(gate) times the layer's slice (emulated)", T, float,
                     __nv_bfloat16, __half) {
    for (Activation a : {Activation::kGeluTanh, Activation::kSilu}) {
      check_gate_emulated<T>(3, 5, 24, 2, a);
      check_gate_emulated<T>(2, 5, 24, 4, a);
    }
  }

  TEST_CASE_TEMPLATE("residual tail's block code: x + norm(delta), times the layer scalar, copied to T (emulated)",
                     T, float, __nv_bfloat16, __half) {
    for (int dim : {64, 1536}) {
      CAPTURE(dim);
      for (int parts = 0; parts < 8; ++parts) {
        CAPTURE(parts);
        check_tail_emulated<T>(3, dim, parts & 1, parts & 2, parts & 4);
      }
    }
  }
}

}  // namespace cbatch::test
