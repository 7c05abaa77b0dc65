// The gated DeltaNet launchers (deltanet.hpp) on the GPU against deltanet_case.hpp's float64 reference, with
// the projections in fp32 and in bf16 (the case's inputs rounded to bf16 first, so that the reference sees
// the values the kernels read), key heads grouped and tiled, Qwen3.5's 128 x 128 heads (past 48 KB of shared
// memory); the same rows split over two steps leave the same states and outputs bit for bit.
// test_deltanet_emulated.cpp runs the block code of the same kernels on the CPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <type_traits>
#include <vector>

#include "cuda/recurrent/deltanet.hpp"
#include "tests/cuda/deltanet_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

// The four launchers on the case's rows in T; the states advance in place.
template <typename T>
std::vector<float> run_device(const DeltaNetCase& dc, const RecurrentCase& c, std::vector<float>& conv_state,
                              std::vector<float>& state) {
  const DeltaNetSizes& d = dc.d;
  const int rows = c.num_rows(), ns = c.num_seqs();
  const cudaStream_t stream = nullptr;
  DeviceBuffer<T> proj = to_device<T>(c.inputs), ba = to_device<T>(c.side);
  DeviceBuffer<float> taps = to_device<float>(dc.taps), decay = to_device<float>(dc.decay);
  DeviceBuffer<float> dt_bias = to_device<float>(dc.dt_bias), norm = to_device<float>(dc.norm);
  DeviceBuffer<float> conv = to_device<float>(conv_state), rec = to_device<float>(state);
  DeviceBuffer<int32_t> begin = to_device_i32(c.begin), real = to_device_i32(c.real), slot = to_device_i32(c.slot);
  DeviceBuffer<float> conv_out(static_cast<size_t>(rows) * d.conv_dim());
  DeviceBuffer<float> gates(static_cast<size_t>(rows) * 2 * d.num_v_heads);
  DeviceBuffer<float> core(static_cast<size_t>(rows) * d.value_dim());
  DeviceBuffer<T> out(static_cast<size_t>(rows) * d.value_dim());
  poison(conv_out);
  poison(core);
  const DeltaNetSeqs seqs{begin.get(), real.get(), slot.get()};
  const DeltaNetStates states{conv.get(), rec.get(), c.conv_stride, c.recurrent_stride};
  deltanet_conv<T>(conv_out.get(), proj.get(), taps.get(), d, seqs, ns, states, stream);
  deltanet_gates<T>(conv_out.get(), gates.get(), ba.get(), decay.get(), dt_bias.get(), d, rows, stream);
  deltanet_delta_rule(core.get(), conv_out.get(), gates.get(), d, seqs, ns, states, stream);
  deltanet_gated_norm<T>(out.get(), core.get(), proj.get(), norm.get(), d, rows, 1e-6f, stream);
  conv_state = to_host(conv);
  state = to_host(rec);
  return to_host(out);
}

DeltaNetSizes dims(int nk, int nv, int dk, int dv, int kernel, bool tiled) {
  DeltaNetSizes d;
  d.num_k_heads = nk;
  d.num_v_heads = nv;
  d.k_head_dim = dk;
  d.v_head_dim = dv;
  d.conv_kernel = kernel;
  d.tiled_heads = tiled;
  return d;
}

TEST_CASE_TEMPLATE("gated DeltaNet launchers on the GPU: the float64 reference, chunked = whole", T, float,
                   __nv_bfloat16) {
  const double tolerance = std::is_same_v<T, float> ? 2e-4 : 2e-2;  // bf16 outputs: 8 bits of mantissa
  float (*round)(float) = [](float x) { return to_f32(from_f32<T>(x)); };
  check_deltanet_case(dims(2, 4, 16, 24, 4, false), 1, run_device<T>, tolerance, round);
  check_deltanet_case(dims(2, 6, 40, 40, 2, true), 2, run_device<T>, tolerance, round);
  check_deltanet_case(dims(2, 4, 128, 128, 4, true), 3, run_device<T>, tolerance, round);  // Qwen3.5's heads
}

}  // namespace
}  // namespace cbatch::test
