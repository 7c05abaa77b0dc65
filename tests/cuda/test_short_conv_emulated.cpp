// The block code of LFM2's short-conv kernel (short_conv_block.cuh) run on the CPU by the block emulator,
// against short_conv_case.hpp's float64 reference: a prefill, a decode row and a padded sequence in one
// batch, states non-zero; the same rows split over two steps leave the same windows and outputs bit for bit.
// A planted bug (the window advanced by the padding rows too) is caught. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tests/cuda/short_conv_case.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/short_conv_block.cuh"

namespace cbatch::test {
namespace {

using namespace recurrent_detail;

std::vector<float> run_emulated(const ShortConvCase& sc, const RecurrentCase& c, std::vector<float>& conv,
                                std::vector<float>& rec) {
  std::vector<float> out(static_cast<size_t>(c.num_rows()) * sc.dim);
  const RecurrentSeqs seqs = c.seqs();
  const RecurrentStates states{conv.data(), rec.data(), c.conv_stride, c.recurrent_stride};
  const unsigned blocks = static_cast<unsigned>((sc.dim + kConvThreads - 1) / kConvThreads);
  block_emulator::launch({static_cast<unsigned>(c.num_seqs()), blocks, 1}, kConvThreads, [&] {
    short_conv_block<float>(out.data(), c.inputs.data(), sc.taps.data(), sc.dim, sc.kernel, seqs, states);
  });
  return out;
}

void check(const ShortConvCase& sc) {
  check_recurrent_case(
      sc.batch, sc.dim,
      [&](const RecurrentCase& c, std::vector<float>& conv, std::vector<float>& rec) { return run_emulated(sc, c, conv, rec); },
      [&](const RecurrentCase& c, std::vector<double>& conv, std::vector<double>& rec) {
        return short_conv_reference(sc, c, conv, rec);
      },
      2e-5);
}

TEST_SUITE("host") {
TEST_CASE("short conv kernel: LFM2's 3 taps over 160 channels (two channel blocks), chunked = whole") {
  check(make_short_conv_case(160, 3, 1));
}

TEST_CASE("short conv kernel: 1, 2 and 8 taps (no window, one input, the most the kernel takes)") {
  check(make_short_conv_case(40, 1, 2));
  check(make_short_conv_case(40, 2, 3));
  check(make_short_conv_case(40, 8, 4));
}

TEST_CASE("short conv kernel: a planted bug (padding rows advance the window) is caught") {
  const ShortConvCase sc = make_short_conv_case(40, 3, 5);
  RecurrentCase padded_as_real = sc.batch;  // the kernel runs the padding rows as real ones
  padded_as_real.real = {9, 1, 6};
  std::vector<double> conv_ref(sc.batch.conv_state.begin(), sc.batch.conv_state.end()), rec_ref;
  short_conv_reference(sc, sc.batch, conv_ref, rec_ref);
  std::vector<float> conv = sc.batch.conv_state, rec;
  run_emulated(sc, padded_as_real, conv, rec);
  CHECK(largest_diff(conv, conv_ref) > 1e-2);
}

}  // TEST_SUITE("host")

}  // namespace
}  // namespace cbatch::test
