// The Mamba-2 launchers (mamba2.hpp) on the GPU against mamba2_case.hpp's float64 reference, with the
// projections in fp32 and in bf16 (the case's inputs rounded to bf16 first), grouped B and C, dt clamped, and
// Granite 4.0-H's and Nemotron-H's heads (64 x 128 states: 33 KB of shared memory per block); the same rows
// split over two steps leave the same states and outputs bit for bit. The chunked scan (mamba2_chunked.hpp) on
// runs of 1 to 3Q + 5 rows and padded ones against the reference and the token-by-token scan. The emulated tests
// (test_mamba2_emulated.cpp, test_mamba2_chunked_emulated.cpp) run the block code of the same kernels on the CPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cuda/recurrent/mamba2.hpp"
#include "cuda/recurrent/mamba2_chunked.hpp"
#include "tests/cuda/mamba2_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

// The layer's kernels on the case's rows (with `chunked`, runs of kMambaChunkRows rows or more on the chunked
// scan, as the backend dispatches them); the states advance in place.
template <typename T>
std::vector<float> run_device(const Mamba2Case& mc, const RecurrentCase& c, std::vector<float>& conv_state,
                              std::vector<float>& state, bool chunked = false) {
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
  constexpr int kChunk = deltanet_detail::kMambaChunkRows;
  mamba2_scan<T>(y.get(), xbc.get(), proj.get(), decay.get(), dt_bias.get(), skip.get(), d, seqs, c.num_seqs(), states,
                 stream, chunked ? kChunk : INT32_MAX);
  if (chunked) {
    int max_rows = 0;
    for (int s = 0; s < c.num_seqs(); ++s) max_rows = std::max(max_rows, c.begin[s + 1] - c.begin[s]);
    mamba2_chunked_scan<T>(y.get(), xbc.get(), proj.get(), decay.get(), dt_bias.get(), skip.get(), d, seqs,
                           c.num_seqs(), max_rows, states, stream);
  }
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

// The chunked scan against the reference and against the token-by-token scan: outputs and final states within
// a tolerance (the sums round differently).
template <typename T>
void check_chunked_device(const Mamba2Sizes& d, uint32_t seed) {
  constexpr int Q = deltanet_detail::kMambaChunkRows;
  Mamba2Case mc = make_mamba2_case(d, seed, {1, Q - 1, Q, Q + 1, 3 * Q + 5, 150, Q + 6},
                                   {1, Q - 1, Q, Q + 1, 3 * Q + 5, 100, 0});  // padding inside a chunk; alone
  for (float& x : mc.batch.inputs) x = to_f32(from_f32<T>(x));
  const double tolerance = std::is_same_v<T, float> ? 2e-4 : 3e-2;
  const RecurrentCase& c = mc.batch;
  std::vector<double> conv_ref(c.conv_state.begin(), c.conv_state.end());
  std::vector<double> rec_ref(c.recurrent_state.begin(), c.recurrent_state.end());
  const std::vector<double> expected = mamba2_reference(mc, c, conv_ref, rec_ref);
  std::vector<float> conv = c.conv_state, rec = c.recurrent_state;
  const std::vector<float> out = run_device<T>(mc, c, conv, rec, true);
  CHECK(largest_diff(out, expected) < tolerance);
  CHECK(largest_diff(rec, rec_ref) < tolerance);
  std::vector<float> conv_tok = c.conv_state, rec_tok = c.recurrent_state;
  const std::vector<float> out_tok = run_device<T>(mc, c, conv_tok, rec_tok, false);
  CHECK(largest_diff(out, std::vector<double>(out_tok.begin(), out_tok.end())) < tolerance);
  CHECK(largest_diff(rec, std::vector<double>(rec_tok.begin(), rec_tok.end())) < tolerance);
}

TEST_CASE_TEMPLATE("Mamba-2 chunked scan on the GPU: the float64 reference and the token-by-token scan", T, float,
                   __nv_bfloat16) {
  check_chunked_device<T>({4, 16, 24, 2, 4, 0.0f, 0.0f}, 5);
  check_chunked_device<T>({2, 80, 40, 1, 2, 0.3f, 0.9f}, 6);     // heads past an output tile, dt clamped
  check_chunked_device<T>({8, 64, 128, 1, 4, 0.001f, 0.0f}, 7);  // Granite 4.0-H's heads (fewer of them)
  check_chunked_device<T>({8, 64, 128, 8, 4, 0.01f, 0.05f}, 8);  // Nemotron-H's groups, the state carried far
}

}  // namespace
}  // namespace cbatch::test
