// The block code of LFM2's short-conv kernel (short_conv_block.cuh) run on the CPU by the block emulator,
// against short_conv_case.hpp's float64 reference: a prefill, a decode row and a padded sequence in one
// batch, states non-zero; the same rows split over two steps leave the same windows and outputs bit for bit;
// and against the CPU layer's own conv (cpu_recurrent.hpp's causal_conv, as cpu_short_conv.cpp calls it). A
// planted bug (the window advanced by the padding rows too) is caught. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "engine/backend/ragged_batch.hpp"
#include "engine/cpu/cpu_recurrent.hpp"
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

TEST_CASE("short conv kernel: the CPU layer's steps (B * x, causal_conv, C *) give the same outputs and windows") {
  const ShortConvCase sc = make_short_conv_case(72, 3, 6);
  const RecurrentCase& c = sc.batch;
  const int dim = sc.dim;
  RaggedBatch batch;  // what seq_rows reads: the rows per sequence, padding rows marked by slot -1
  batch.query_start.assign(c.begin.begin(), c.begin.end());
  batch.slot_mapping.assign(static_cast<size_t>(c.num_rows()), 0);
  for (int s = 0; s < c.num_seqs(); ++s) {
    for (int r = c.begin[s] + c.real[s]; r < c.begin[s + 1]; ++r) batch.slot_mapping[static_cast<size_t>(r)] = -1;
  }
  std::vector<float> cpu_conv = c.conv_state, y(static_cast<size_t>(c.num_rows()) * dim);
  for (int r = 0; r < c.num_rows(); ++r) {
    for (int i = 0; i < dim; ++i) y[r * dim + i] = c.inputs[r * 3 * dim + i] * c.inputs[r * 3 * dim + 2 * dim + i];
  }
  const ConvTaps taps{sc.taps.data(), nullptr, dim, sc.kernel, false};
  for (int s = 0; s < c.num_seqs(); ++s) {
    const SeqRows rows = seq_rows(batch, s);
    CHECK(rows.real == c.real[s]);
    float* rows_y = &y[static_cast<size_t>(rows.begin) * dim];
    causal_conv(rows_y, dim, rows, taps, &cpu_conv[static_cast<size_t>(c.slot[s] * c.conv_stride)], rows_y, dim);
  }
  for (int r = 0; r < c.num_rows(); ++r) {
    for (int i = 0; i < dim; ++i) y[r * dim + i] *= c.inputs[r * 3 * dim + dim + i];
  }
  std::vector<float> conv = c.conv_state, rec;
  const std::vector<float> out = run_emulated(sc, c, conv, rec);
  CHECK(largest_diff(out, std::vector<double>(y.begin(), y.end())) < 1e-5);
  CHECK(conv == cpu_conv);  // the windows are inputs, copied
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
