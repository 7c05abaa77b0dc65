// Gemma 4's per-layer input launchers (per_layer_input.hpp) on the GPU, on per_layer_case.hpp's cases (the
// block emulator runs the same on the host: test_per_layer_input_emulated.cpp). Outputs are poisoned with NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/elementwise/per_layer_input.hpp"
#include "tests/cuda/per_layer_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

#define CBATCH_TEST_TYPES float, __nv_bfloat16, __half

TEST_CASE_TEMPLATE("per_layer_inputs: the norm of each layer's slice of the projection plus its token's", T,
                   CBATCH_TEST_TYPES) {
  for (int p : {8, 256, 300}) {
    CAPTURE(p);
    const PerLayerInputsCase pc = make_per_layer_inputs_case<T>(3, 4, p, 64);
    auto d_proj = to_device<float>(pc.proj);
    auto d_table = to_device<T>(pc.table);
    auto d_norm = to_device<float>(pc.norm);
    auto d_tokens = to_device_i32(pc.tokens);
    DeviceBuffer<float> d_out(pc.rows * pc.all());
    poison(d_out);
    per_layer_inputs<T>(d_out.get(), d_proj.get(), d_table.get(), d_tokens.get(), d_norm.get(), pc.rows, pc.num_layers,
                        p, pc.dim, kPerLayerEps, nullptr);
    CHECK(rel_error(to_host(d_out), pc.ref) < 1e-5);
    per_layer_inputs<T>(d_proj.get(), d_proj.get(), d_table.get(), d_tokens.get(), d_norm.get(), pc.rows,
                        pc.num_layers, p, pc.dim, kPerLayerEps, nullptr);  // in place, as the backend runs it
    CHECK(rel_error(to_host(d_proj), pc.ref) < 1e-5);
  }
}

TEST_CASE_TEMPLATE("per_layer_gate: act(gate) times the layer's slice", T, CBATCH_TEST_TYPES) {
  for (Activation a : {Activation::kGeluTanh, Activation::kSilu}) {
    const PerLayerGateCase gc = make_per_layer_gate_case<T>(3, 5, 24, 2, a);
    auto d_gate = to_device<T>(gc.gate);
    auto d_inputs = to_device<float>(gc.inputs);
    per_layer_gate<T>(d_gate.get(), d_inputs.get(), gc.layer, gc.rows, gc.num_layers, gc.p, a, nullptr);
    CHECK(rel_error(to_host(d_gate), gc.ref) < tolerance<T>());
  }
}

TEST_CASE_TEMPLATE("residual_tail: x + norm(delta), times the layer scalar, copied to T", T, CBATCH_TEST_TYPES) {
  for (int dim : {64, 1536}) {
    for (int parts = 0; parts < 8; ++parts) {
      CAPTURE(dim);
      CAPTURE(parts);
      const ResidualTailCase tc = make_residual_tail_case<T>(3, dim, parts & 1, parts & 2, parts & 4);
      auto d_x = to_device<float>(tc.x);
      auto d_delta = to_device<T>(tc.delta);
      auto d_w = to_device<float>(tc.w);
      auto d_scale = to_device<float>({tc.scale});
      DeviceBuffer<T> d_out(tc.x.size());
      poison(d_out);
      residual_tail<T>(d_x.get(), tc.with_delta ? d_delta.get() : nullptr, d_w.get(),
                       tc.with_scale ? d_scale.get() : nullptr, tc.with_out ? d_out.get() : nullptr, tc.rows, dim,
                       kPerLayerEps, nullptr);
      CHECK(rel_error(to_host(d_x), tc.ref) < 1e-5);
      if (tc.with_out) CHECK(rel_error(to_host(d_out), tc.ref) < tolerance<T>());
    }
  }
}

}  // namespace cbatch::test
