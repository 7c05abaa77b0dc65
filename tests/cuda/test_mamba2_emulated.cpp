// The block code of the Mamba-2 kernels (mamba2_block.cuh) run on the CPU by the block emulator, against
// mamba2_case.hpp's float64 reference: a prefill, a decode row and a padded sequence in one batch, states
// non-zero; the same rows split over two steps leave the same states and outputs bit for bit. Groups shared by
// several heads, dt clamped on both sides; a planted bug (padding rows advancing the states) is caught.
// Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tests/cuda/mamba2_case.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/mamba2_block.cuh"

namespace cbatch::test {
namespace {

using namespace recurrent_detail;

// The three kernels' block code on the batch's rows; the states advance in place.
std::vector<float> run_emulated(const Mamba2Case& mc, const Mamba2Sizes& d, const RecurrentCase& c,
                                std::vector<float>& conv, std::vector<float>& rec) {
  const int rows = c.num_rows(), ns = c.num_seqs();
  std::vector<float> xbc(static_cast<size_t>(rows) * d.conv_dim()), y(static_cast<size_t>(rows) * d.inner());
  std::vector<float> out(y.size());
  const RecurrentSeqs seqs = c.seqs();
  const RecurrentStates states{conv.data(), rec.data(), c.conv_stride, c.recurrent_stride};
  const unsigned conv_blocks = static_cast<unsigned>((d.conv_dim() + kConvThreads - 1) / kConvThreads);
  block_emulator::launch({static_cast<unsigned>(ns), conv_blocks, 1}, kConvThreads, [&] {
    mamba2_conv_block<float>(xbc.data(), c.inputs.data(), mc.taps.data(), mc.conv_bias.data(), d, seqs, states);
  });
  std::vector<float> smem(static_cast<size_t>(d.state_size) * (d.head_dim + 2));
  block_emulator::launch({static_cast<unsigned>(ns), static_cast<unsigned>(d.num_heads), 1}, (d.head_dim + 31) / 32 * 32, [&] {
    mamba2_scan_block<float>(y.data(), xbc.data(), c.inputs.data(), mc.decay.data(), mc.dt_bias.data(), mc.skip.data(), d,
                             seqs, states, smem.data());
  });
  block_emulator::launch({static_cast<unsigned>(rows), static_cast<unsigned>(d.num_groups), 1}, kMambaNormThreads,
                         [&] { mamba2_gated_norm_block<float>(out.data(), y.data(), c.inputs.data(), mc.norm.data(), d, 1e-6f); });
  return out;
}

void check(const Mamba2Case& mc) {
  check_recurrent_case(
      mc.batch, mc.d.inner(),
      [&](const RecurrentCase& c, std::vector<float>& conv, std::vector<float>& rec) {
        return run_emulated(mc, mc.d, c, conv, rec);
      },
      [&](const RecurrentCase& c, std::vector<double>& conv, std::vector<double>& rec) {
        return mamba2_reference(mc, c, conv, rec);
      },
      2e-4);
}

Mamba2Sizes dims(int heads, int head_dim, int state, int groups, int kernel, float dt_min, float dt_max) {
  return {heads, head_dim, state, groups, kernel, dt_min, dt_max};
}

TEST_SUITE("host") {
TEST_CASE("Mamba-2 kernels: 4 heads over 2 groups, against the float64 reference, chunked = whole") {
  check(make_mamba2_case(dims(4, 16, 24, 2, 4, 0.0f, 0.0f), 1));  // a warp with idle lanes, no dt clamp
}

TEST_CASE("Mamba-2 kernels: one group, heads past a warp, dt clamped both ways, a 2-tap conv") {
  check(make_mamba2_case(dims(3, 40, 16, 1, 2, 0.3f, 0.9f), 2));
}

TEST_CASE("Mamba-2 kernels: a group per head, x|B|C past a conv block") {
  check(make_mamba2_case(dims(4, 32, 20, 4, 3, 0.001f, 0.0f), 3));  // conv_dim 288: three conv blocks
}

TEST_CASE("Mamba-2 kernels: a planted bug (padding rows advance the states) is caught") {
  const Mamba2Case mc = make_mamba2_case(dims(4, 16, 16, 2, 4, 0.0f, 0.0f), 4);
  std::vector<double> conv_ref(mc.batch.conv_state.begin(), mc.batch.conv_state.end());
  std::vector<double> rec_ref(mc.batch.recurrent_state.begin(), mc.batch.recurrent_state.end());
  mamba2_reference(mc, mc.batch, conv_ref, rec_ref);
  RecurrentCase padded_as_real = mc.batch;  // the kernels run the padding rows as real ones
  padded_as_real.real = {9, 1, 6};
  std::vector<float> conv = mc.batch.conv_state, rec = mc.batch.recurrent_state;
  run_emulated(mc, mc.d, padded_as_real, conv, rec);
  CHECK(largest_diff(conv, conv_ref) > 1e-2);
  CHECK(largest_diff(rec, rec_ref) > 1e-2);
}

}  // TEST_SUITE("host")

}  // namespace
}  // namespace cbatch::test
