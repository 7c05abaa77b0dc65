// The cases of Gemma 4's per-layer input kernels (test_per_layer_input_emulated.cpp on the host,
// test_per_layer_input.cpp on the GPU): inputs in T (held as floats) and float64 references written from the
// CPU backend's cpu_per_layer_input.cpp: the inputs of every layer, the gate times a layer's slice, and the
// layer tail x = (x + norm(delta) * w) * scale.
#pragma once
#include <math.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/model/model_config.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

constexpr float kPerLayerEps = 1e-6f;

inline double inv_rms_ref(const double* v, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += v[i] * v[i];
  return 1.0 / std::sqrt(s / n + kPerLayerEps);
}

// per_layer_inputs: proj (rows, L p) fp32, table (vocab, L p) in T, norm (p), tokens (rows); ref (rows, L p).
struct PerLayerInputsCase {
  int rows, num_layers, p, dim;
  std::vector<float> proj, table, norm;
  std::vector<int32_t> tokens;
  std::vector<double> ref;
  size_t all() const { return static_cast<size_t>(num_layers) * p; }
};

template <typename T>
PerLayerInputsCase make_per_layer_inputs_case(int rows, int num_layers, int p, int dim) {
  const int vocab = 11;
  PerLayerInputsCase pc{rows, num_layers, p, dim, {}, {}, {}, {}, {}};
  const size_t all = pc.all();
  pc.proj = random_vector(rows * all, 31 + p, -9.0f, 9.0f);
  pc.table = round_to<T>(random_vector(vocab * all, 32 + p, -1.0f, 1.0f));
  pc.norm = random_vector(static_cast<size_t>(p), 33, 0.5f, 1.5f);
  for (int r = 0; r < rows; ++r) pc.tokens.push_back((7 * r + 3) % vocab);
  pc.ref.resize(rows * all);
  for (int r = 0; r < rows; ++r) {
    for (int l = 0; l < num_layers; ++l) {
      std::vector<double> v(static_cast<size_t>(p));
      for (int i = 0; i < p; ++i) v[i] = pc.proj[r * all + l * p + i] / std::sqrt(static_cast<double>(dim));
      const double inv = inv_rms_ref(v.data(), p);
      for (int i = 0; i < p; ++i) {
        const double tok = pc.table[pc.tokens[r] * all + l * p + i] * std::sqrt(static_cast<double>(p));
        pc.ref[r * all + l * p + i] = (v[i] * inv * pc.norm[i] + tok) / std::sqrt(2.0);
      }
    }
  }
  return pc;
}

// per_layer_gate of `layer`: gate (rows, p) in T, inputs (rows, L p) fp32; ref (rows, p).
struct PerLayerGateCase {
  int rows, num_layers, p, layer;
  Activation activation;
  std::vector<float> gate, inputs;
  std::vector<double> ref;
};

template <typename T>
PerLayerGateCase make_per_layer_gate_case(int rows, int num_layers, int p, int layer, Activation activation) {
  PerLayerGateCase gc{rows, num_layers, p, layer, activation, {}, {}, {}};
  const size_t all = static_cast<size_t>(num_layers) * p;
  gc.gate = round_to<T>(random_vector(static_cast<size_t>(rows) * p, 41, -4.0f, 4.0f));
  gc.inputs = random_vector(rows * all, 42, -2.0f, 2.0f);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < p; ++i) {
      const double a = gc.gate[static_cast<size_t>(r) * p + i];
      const double act = activation == Activation::kGeluTanh
                             ? 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)))
                             : a / (1.0 + std::exp(-a));
      gc.ref.push_back(act * gc.inputs[r * all + static_cast<size_t>(layer) * p + i]);
    }
  }
  return gc;
}

// residual_tail: x (rows, dim) fp32, delta (rows, dim) in T, w (dim), the scale; ref: x after.
struct ResidualTailCase {
  int rows, dim;
  bool with_delta, with_scale, with_out;
  std::vector<float> x, delta, w;
  float scale = 0.37f;
  std::vector<double> ref;
};

template <typename T>
ResidualTailCase make_residual_tail_case(int rows, int dim, bool with_delta, bool with_scale, bool with_out) {
  ResidualTailCase tc{rows, dim, with_delta, with_scale, with_out, {}, {}, {}, 0.37f, {}};
  const size_t n = static_cast<size_t>(rows) * dim;
  tc.x = random_vector(n, 51 + dim, -2.0f, 2.0f);
  tc.delta = round_to<T>(random_vector(n, 52 + dim, -30.0f, 30.0f));
  tc.w = random_vector(static_cast<size_t>(dim), 53, 0.5f, 2.5f);
  for (int r = 0; r < rows; ++r) {
    const auto row = tc.delta.begin() + static_cast<long>(r) * dim;
    std::vector<double> d(row, row + dim);
    const double inv = inv_rms_ref(d.data(), dim);
    for (int i = 0; i < dim; ++i) {
      const double v = tc.x[static_cast<size_t>(r) * dim + i] + (with_delta ? d[i] * inv * tc.w[i] : 0.0);
      tc.ref.push_back(v * (with_scale ? tc.scale : 1.0));
    }
  }
  return tc;
}

}  // namespace cbatch::test
