// LFM2's short-conv launcher (short_conv.hpp) on the GPU against short_conv_case.hpp's float64 reference,
// with the projections in fp32 and in bf16 (the case's inputs rounded to bf16 first, so that the reference
// reads the values the kernel reads), LFM2-350M's 1,024 channels among them; the same rows split over two
// steps leave the same windows and outputs bit for bit. test_short_conv_emulated.cpp runs its block code on
// the CPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <type_traits>
#include <vector>

#include "cuda/recurrent/short_conv.hpp"
#include "tests/cuda/short_conv_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

template <typename T>
std::vector<float> run_device(const ShortConvCase& sc, const RecurrentCase& c, std::vector<float>& conv_state,
                              std::vector<float>& rec) {
  DeviceBuffer<T> proj = to_device<T>(c.inputs);
  DeviceBuffer<float> taps = to_device<float>(sc.taps), conv = to_device<float>(conv_state);
  DeviceBuffer<int32_t> begin = to_device_i32(c.begin), real = to_device_i32(c.real), slot = to_device_i32(c.slot);
  DeviceBuffer<T> out(static_cast<size_t>(c.num_rows()) * sc.dim);
  poison(out);
  const deltanet_detail::DeltaNetSeqs seqs{begin.get(), real.get(), slot.get()};
  const deltanet_detail::DeltaNetStates states{conv.get(), nullptr, c.conv_stride, 0};
  short_conv<T>(out.get(), proj.get(), taps.get(), sc.dim, sc.kernel, seqs, c.num_seqs(), states, nullptr);
  conv_state = to_host(conv);
  (void)rec;
  return to_host(out);
}

template <typename T>
void check_device(int dim, int kernel, uint32_t seed) {
  ShortConvCase sc = make_short_conv_case(dim, kernel, seed);
  for (float& x : sc.batch.inputs) x = to_f32(from_f32<T>(x));
  const double tolerance = std::is_same_v<T, float> ? 2e-5 : 2e-2;  // bf16 outputs: 8 bits of mantissa
  check_recurrent_case(
      sc.batch, dim,
      [&](const RecurrentCase& c, std::vector<float>& conv, std::vector<float>& rec) { return run_device<T>(sc, c, conv, rec); },
      [&](const RecurrentCase& c, std::vector<double>& conv, std::vector<double>& rec) {
        return short_conv_reference(sc, c, conv, rec);
      },
      tolerance);
}

TEST_CASE_TEMPLATE("short conv launcher on the GPU: the float64 reference, chunked = whole", T, float, __nv_bfloat16) {
  check_device<T>(160, 3, 1);
  check_device<T>(1024, 3, 2);  // LFM2-350M's width
  check_device<T>(40, 1, 3);
}

}  // namespace
}  // namespace cbatch::test
