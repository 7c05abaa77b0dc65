// The block code of Gemma 4's per-layer inputs and layer tail (per_layer_input_block.cuh) run on the CPU by
// the block emulator, against per_layer_case.hpp's float64 references of the CPU backend's
// cpu_per_layer_input.cpp (transformers' get_per_layer_inputs / project_per_layer_inputs and the decoder
// layer's end; test_per_layer_input.cpp runs the same cases on the GPU): the inputs
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
#include "tests/cuda/per_layer_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/elementwise/swiglu_block.cuh"
#include "cuda/elementwise/per_layer_input_block.cuh"

namespace cbatch::test {
namespace {

// per_layer_inputs on rows of tokens: proj (rows, L p) fp32, table (vocab, L p) in T.
template <typename T>
void check_inputs_emulated(int rows, int num_layers, int p, int dim) {
  const PerLayerInputsCase pc = make_per_layer_inputs_case<T>(rows, num_layers, p, dim);
  const std::vector<T> table_t = to_t<T>(pc.table);
  std::vector<float> out(rows * pc.all(), NAN);
  block_emulator::launch(static_cast<unsigned>(rows), per_layer_detail::kPerLayerThreads, [&] {
    per_layer_detail::per_layer_inputs_block<T>(out.data(), pc.proj.data(), table_t.data(), pc.tokens.data(),
                                                pc.norm.data(), num_layers, p, kPerLayerEps,
                                                1.0f / std::sqrt(static_cast<float>(dim)),
                                                std::sqrt(static_cast<float>(p)), 1.0f / std::sqrt(2.0f));
  });
  CHECK(rel_error(out, pc.ref) < 1e-6);  // fp32 throughout, the table's values exact in T
}

// per_layer_gate of layer `layer` with the activation.
template <typename T>
void check_gate_emulated(int rows, int num_layers, int p, int layer, Activation activation) {
  const PerLayerGateCase gc = make_per_layer_gate_case<T>(rows, num_layers, p, layer, activation);
  std::vector<T> out = to_t<T>(gc.gate);
  const size_t n = out.size();
  constexpr int kThreads = 64;
  block_emulator::launch(static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, [&] {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
      per_layer_detail::per_layer_gate_element<T>(out.data(), gc.inputs.data(), i, layer, num_layers, p, activation);
    }
  });
  CHECK(rel_error(to_float_vector(out), gc.ref) < tolerance<T>());
}

// residual_tail: x = (x + norm(delta) * w) * scale, with or without each part, and its copy in T.
template <typename T>
void check_tail_emulated(int rows, int dim, bool with_delta, bool with_scale, bool with_out) {
  const ResidualTailCase tc = make_residual_tail_case<T>(rows, dim, with_delta, with_scale, with_out);
  const std::vector<T> delta_t = to_t<T>(tc.delta);
  std::vector<float> x = tc.x;
  std::vector<T> out(x.size(), from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(rows), per_layer_detail::kPerLayerThreads, [&] {
    per_layer_detail::residual_tail_block<T>(x.data(), with_delta ? delta_t.data() : nullptr, tc.w.data(),
                                             with_scale ? &tc.scale : nullptr, with_out ? out.data() : nullptr, dim,
                                             kPerLayerEps);
  });
  CHECK(rel_error(x, tc.ref) < 1e-6);
  if (with_out) {
    CHECK(rel_error(to_float_vector(out), tc.ref) < tolerance<T>());
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
