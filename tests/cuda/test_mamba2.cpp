// The Mamba-2 launchers (mamba2.hpp) on the GPU against mamba2_case.hpp's float64 reference, with the
// projections in fp32 and in bf16 (the case's inputs rounded to bf16 first), grouped B and C, dt clamped, and
// Granite 4.0-H's and Nemotron-H's heads (64 x 128 states: 33 KB of shared memory per block); the same rows
// split over two steps leave the same states and outputs bit for bit. test_mamba2_emulated.cpp runs the block
// code of the same kernels on the CPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <type_traits>
#include <vector>

#include "cuda/recurrent/mamba2.hpp"
#include "tests/cuda/mamba2_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

template <typename T>
std::vector<float> run_device(const Mamba2Case& mc, const RecurrentCase& c, std::vector<float>& conv_state,
                              std::vector<float>& state) {
  const Mamba2Sizes& d = mc.d;
  const int rows = c.num_rows();
  DeviceBuffer<T> proj = to_device<T>(c.inputs);
  DeviceBuffer<float> taps = to_device<float>(mc.taps), bias = to_device<float>(mc.conv_bias);
  DeviceBuffer<float> decay = to_device<float>(mc.decay), dt_bias = to_device<float>(mc.dt_bias);
  DeviceBuffer<float> skip = to_device<float>(mc.skip), norm = to_device<float>(mc.norm);
  DeviceBuffer<float> conv = to_device<float>(conv_state), rec = to_device<float>(state);
  DeviceBuffer<int32_t> begin = to_device_i32(c.begin), real = to_device_i32(c.real), slot = to_device_i32(c.slot);
  DeviceBuffer<float> xbc(static_cast<size_t>(rows) * d.conv_dim()), y(static_cast<size_t>(rows) * d.inner());
  DeviceBuffer<T> out(static_cast<size_t>(rows) * d.inner());
  poison(xbc);
  poison(y);
  const deltanet_detail::DeltaNetSeqs seqs{begin.get(), real.get(), slot.get()};
  const deltanet_detail::DeltaNetStates states{conv.get(), rec.get(), c.conv_stride, c.recurrent_stride};
  const cudaStream_t stream = nullptr;
  mamba2_conv<T>(xbc.get(), proj.get(), taps.get(), bias.get(), d, seqs, c.num_seqs(), states, stream);
  mamba2_scan<T>(y.get(), xbc.get(), proj.get(), decay.get(), dt_bias.get(), skip.get(), d, seqs, c.num_seqs(), states,
                 stream);
  mamba2_gated_norm<T>(out.get(), y.get(), proj.get(), norm.get(), d, rows, 1e-6f, stream);
  conv_state = to_host(conv);
  state = to_host(rec);
  return to_host(out);
}

template <typename T>
void check_device(const Mamba2Sizes& d, uint32_t seed) {
  Mamba2Case mc = make_mamba2_case(d, seed);
  for (float& x : mc.batch.inputs) x = to_f32(from_f32<T>(x));
  const double tolerance = std::is_same_v<T, float> ? 2e-4 : 3e-2;  // bf16 outputs: 8 bits of mantissa
  check_recurrent_case(
      mc.batch, d.inner(),
      [&](const RecurrentCase& c, std::vector<float>& conv, std::vector<float>& rec) { return run_device<T>(mc, c, conv, rec); },
      [&](const RecurrentCase& c, std::vector<double>& conv, std::vector<double>& rec) {
        return mamba2_reference(mc, c, conv, rec);
      },
      tolerance);
}

TEST_CASE_TEMPLATE("Mamba-2 launchers on the GPU: the float64 reference, chunked = whole", T, float, __nv_bfloat16) {
  check_device<T>({4, 16, 24, 2, 4, 0.0f, 0.0f}, 1);
  check_device<T>({3, 40, 16, 1, 2, 0.3f, 0.9f}, 2);
  check_device<T>({8, 64, 128, 1, 4, 0.001f, 0.0f}, 3);  // Granite 4.0-H's heads (fewer of them)
  check_device<T>({8, 64, 128, 8, 4, 0.0f, 0.0f}, 4);    // Nemotron-H's groups
}

}  // namespace
}  // namespace cbatch::test
