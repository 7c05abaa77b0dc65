// The block code of the chunked Mamba-2 scan (mamba2_chunked_block.cuh) run on the CPU by the block emulator,
// beside the token-by-token scan (mamba2_block.cuh) as the backend dispatches them: sequences of 1, Q - 1, Q,
// Q + 1 and 3Q + 5 rows (Q = kMambaChunkRows) and three padded ones (the real rows ending inside a chunk, at
// a chunk's end, and none) in one batch, states non-zero, against mamba2_case.hpp's float64 reference and against the
// token-by-token scan alone (outputs and final states within a tolerance: the chunked sums round
// differently); a second call continues the first. Head and state sizes past and short of the tiles, groups
// shared by heads and one per head, dt clamped. Part of the host suite.
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
#include "cuda/recurrent/mamba2_chunked_block.cuh"

namespace cbatch::test {
namespace {

using namespace recurrent_detail;
constexpr int Q = kMambaChunkRows;

// The scan's outputs y (rows, inner) of the batch's rows, as the backend runs them: the conv, then the
// token-by-token scan (every sequence, or with `chunked` those under Q rows) and the chunked kernels; the
// states advance in place.
std::vector<float> run_scan(const Mamba2Case& mc, const RecurrentCase& c, std::vector<float>& conv,
                            std::vector<float>& rec, bool chunked) {
  const Mamba2Sizes& d = mc.d;
  const int rows = c.num_rows(), ns = c.num_seqs();
  std::vector<float> xbc(static_cast<size_t>(rows) * d.conv_dim()), y(static_cast<size_t>(rows) * d.inner(), NAN);
  const RecurrentSeqs seqs = c.seqs();
  const RecurrentStates states{conv.data(), rec.data(), c.conv_stride, c.recurrent_stride};
  const unsigned conv_blocks = static_cast<unsigned>((d.conv_dim() + kConvThreads - 1) / kConvThreads);
  block_emulator::launch({static_cast<unsigned>(ns), conv_blocks, 1}, kConvThreads, [&] {
    mamba2_conv_block<float>(xbc.data(), c.inputs.data(), mc.taps.data(), mc.conv_bias.data(), d, seqs, states);
  });
  std::vector<float> smem(static_cast<size_t>(d.state_size) * (d.head_dim + 2));
  const int heads = d.num_heads;
  const int scan_threads = (d.head_dim + 31) / 32 * 32;
  block_emulator::launch({static_cast<unsigned>(ns), static_cast<unsigned>(heads), 1}, scan_threads, [&] {
    mamba2_scan_block<float>(y.data(), xbc.data(), c.inputs.data(), mc.decay.data(), mc.dt_bias.data(), mc.skip.data(),
                             d, seqs, states, smem.data(), chunked ? Q : INT32_MAX);
  });
  if (!chunked) return y;
  int max_rows = 0;
  for (int s = 0; s < ns; ++s) max_rows = std::max(max_rows, c.begin[s + 1] - c.begin[s]);
  std::vector<float> intra(static_cast<size_t>(chunk_intra_floats()), NAN);
  const unsigned chunks = static_cast<unsigned>((max_rows + Q - 1) / Q);
  block_emulator::launch({chunks, static_cast<unsigned>(heads), static_cast<unsigned>(ns)}, kChunkThreads, [&] {
    mamba2_chunk_intra_block<float>(y.data(), xbc.data(), c.inputs.data(), mc.decay.data(), mc.dt_bias.data(),
                                    mc.skip.data(), d, seqs, intra.data());
  });
  std::vector<float> state_smem(static_cast<size_t>(chunk_state_floats(d)), NAN);
  const unsigned state_blocks = static_cast<unsigned>(heads * chunk_state_parts(d));
  block_emulator::launch({state_blocks, static_cast<unsigned>(ns), 1}, kChunkThreads, [&] {
    mamba2_chunk_state_block<float>(y.data(), xbc.data(), c.inputs.data(), mc.decay.data(), mc.dt_bias.data(), d,
                                    seqs, states, state_smem.data());
  });
  return y;
}

// The gated norm after the scan: the layer's outputs (rows, inner), as the reference gives them.
std::vector<float> run_layer(const Mamba2Case& mc, const RecurrentCase& c, std::vector<float>& conv,
                             std::vector<float>& rec, bool chunked) {
  const std::vector<float> y = run_scan(mc, c, conv, rec, chunked);
  std::vector<float> out(y.size());
  block_emulator::launch({static_cast<unsigned>(c.num_rows()), static_cast<unsigned>(mc.d.num_groups), 1},
                         kMambaNormThreads,
                         [&] { mamba2_gated_norm_block<float>(out.data(), y.data(), c.inputs.data(), mc.norm.data(),
                                                              mc.d, 1e-6f); });
  return out;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Padding from inside a chunk, from a chunk's end, and a run of padding alone (its state left as it was).
const std::vector<int> kRows = {1, Q - 1, Q, Q + 1, 3 * Q + 5, 150, 2 * Q + 12, Q + 6};
const std::vector<int> kReal = {1, Q - 1, Q, Q + 1, 3 * Q + 5, 100, 2 * Q, 0};

// Every value of the chunked path against the float64 reference and against the token-by-token scan.
void check_chunked(const Mamba2Sizes& d, uint32_t seed, double tolerance = 1e-4) {
  const Mamba2Case mc = make_mamba2_case(d, seed, kRows, kReal);
  const RecurrentCase& c = mc.batch;
  std::vector<double> conv_ref = widen(c.conv_state), rec_ref = widen(c.recurrent_state);
  const std::vector<double> expected = mamba2_reference(mc, c, conv_ref, rec_ref);
  std::vector<float> conv = c.conv_state, rec = c.recurrent_state;
  const std::vector<float> out = run_layer(mc, c, conv, rec, true);
  CHECK(largest_diff(out, expected) < tolerance);
  CHECK(largest_diff(rec, rec_ref) < tolerance);
  CHECK(largest_diff(conv, conv_ref) < tolerance);

  std::vector<float> conv_tok = c.conv_state, rec_tok = c.recurrent_state;
  std::vector<float> conv_chk = c.conv_state, rec_chk = c.recurrent_state;
  const std::vector<float> y_tok = run_scan(mc, c, conv_tok, rec_tok, false);
  const std::vector<float> y_chk = run_scan(mc, c, conv_chk, rec_chk, true);
  CHECK(largest_diff(y_chk, widen(y_tok)) < tolerance);
  CHECK(largest_diff(rec_chk, widen(rec_tok)) < tolerance);
  for (int s = 0; s < 2; ++s) {  // under Q rows: the token-by-token scan itself
    for (int i = c.begin[s] * d.inner(); i < c.begin[s + 1] * d.inner(); ++i) REQUIRE(y_chk[i] == y_tok[i]);
  }
}

// The rows split at `at` into two calls, the second continuing from the states the first left: the real rows'
// outputs and the final states against the reference (padding rows continue from the state of their own call,
// which for a run of padding split over two calls is not the reference's).
void check_continued(const Mamba2Sizes& d, uint32_t seed, int at, double tolerance = 1e-4) {
  const Mamba2Case mc = make_mamba2_case(d, seed, kRows, kReal);
  const RecurrentCase& c = mc.batch;
  std::vector<double> conv_ref = widen(c.conv_state), rec_ref = widen(c.recurrent_state);
  const std::vector<double> expected = mamba2_reference(mc, c, conv_ref, rec_ref);
  const RecurrentCase first = rows_of(c, 0, at), second = rows_of(c, at, 1 << 20);
  std::vector<float> conv = c.conv_state, rec = c.recurrent_state;
  const std::vector<float> out_first = run_layer(mc, first, conv, rec, true);
  const std::vector<float> out_second = run_layer(mc, second, conv, rec, true);
  CHECK(largest_diff(rec, rec_ref) < tolerance);
  double worst = 0;
  const int inner = d.inner();
  for (int s = 0; s < c.num_seqs(); ++s) {
    for (int t = 0; t < c.real[s]; ++t) {
      const bool early = t < at;
      const std::vector<float>& part_out = early ? out_first : out_second;
      const int64_t pr = (early ? first : second).begin[s] + (early ? t : t - at), r = c.begin[s] + t;
      for (int i = 0; i < inner; ++i) {
        worst = std::max(worst, std::abs(part_out[pr * inner + i] - expected[r * inner + i]));
      }
    }
  }
  CHECK(worst < tolerance);
}

Mamba2Sizes dims(int heads, int head_dim, int state, int groups, int kernel, float dt_min, float dt_max) {
  return {heads, head_dim, state, groups, kernel, dt_min, dt_max};
}

TEST_SUITE("host") {
TEST_CASE("Mamba-2 chunked scan: 4 heads over 2 groups, a state short of a tile, against the reference") {
  check_chunked(dims(4, 16, 24, 2, 4, 0.0f, 0.0f), 11);
}

TEST_CASE("Mamba-2 chunked scan: one group, heads past an output tile, dt clamped both ways") {
  check_chunked(dims(2, 80, 40, 1, 2, 0.3f, 0.9f), 12);
}

TEST_CASE("Mamba-2 chunked scan: a group per head, states past a tile of both blocks, dt clamped below") {
  check_chunked(dims(3, 24, 72, 3, 3, 0.05f, 0.0f), 13);
}

TEST_CASE("Mamba-2 chunked scan: dt clamped small, the state carried over several chunks") {
  check_chunked(dims(2, 16, 24, 1, 4, 0.01f, 0.05f), 16);
  check_continued(dims(2, 16, 24, 2, 4, 0.01f, 0.05f), 17, 70);
}

TEST_CASE("Mamba-2 chunked scan: a second call continues the first (splits inside and at a chunk)") {
  check_continued(dims(4, 16, 24, 2, 4, 0.0f, 0.0f), 14, 70);
  check_continued(dims(2, 40, 16, 1, 4, 0.0f, 0.0f), 15, Q);
}

}  // TEST_SUITE("host")

}  // namespace
}  // namespace cbatch::test
