// The block code of the gated DeltaNet kernels (deltanet_block.cuh) run on the CPU by the block emulator,
// against deltanet_case.hpp's float64 reference, with key heads grouped and tiled. Three sequences of
// different lengths share the batch (recurrent_case.hpp), one with padding rows (static mode), and their states
// start non-zero; the same rows split over two steps leave the same states and outputs bit for bit as one
// step, and padding rows leave the state as it was. The chunked delta rule (deltanet_chunked_block.cuh) on runs
// of 1, C - 1, C, C + 1 and 3C + 5 rows beside a decode row and a padded sequence, decay factors mid, near 1 and
// near 0: against the reference and the token-by-token kernel, outputs and final states, and a second chunked
// step continuing the first's states. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/recurrent/deltanet_chunk_plan.hpp"
#include "tests/cuda/deltanet_case.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/deltanet_block.cuh"
#include "cuda/recurrent/deltanet_chunked_block.cuh"

namespace cbatch::test {
namespace {

// The delta rule's outputs before the norm (core) and the layer's after it (out), (rows, value_dim) each.
struct DeltaNetOutputs {
  std::vector<float> core, out;
};

// The kernels' block code on the batch's rows, the sequences of at least min_chunk_rows real rows on the
// chunked delta rule (0: none); the states advance in place. core starts as NaN: a row left unwritten shows.
DeltaNetOutputs run_kernels(const DeltaNetCase& dc, const RecurrentCase& c, std::vector<float>& conv_state,
                            std::vector<float>& state, int min_chunk_rows) {
  const DeltaNetSizes& d = dc.d;
  const int rows = c.num_rows(), ns = c.num_seqs(), nv = d.num_v_heads;
  std::vector<float> conv_out(static_cast<size_t>(rows) * d.conv_dim()), gates(static_cast<size_t>(rows) * 2 * nv);
  DeltaNetOutputs o{std::vector<float>(static_cast<size_t>(rows) * d.value_dim(), NAN), {}};
  o.out.resize(o.core.size());
  DeltaNetSeqs seqs = c.seqs();
  const DeltaNetStates states{conv_state.data(), state.data(), c.conv_stride, c.recurrent_stride};
  using namespace deltanet_detail;
  const unsigned conv_blocks = static_cast<unsigned>((d.conv_dim() + kConvThreads - 1) / kConvThreads);
  block_emulator::launch({static_cast<unsigned>(ns), conv_blocks, 1}, kConvThreads,
                         [&] { conv_block<float>(conv_out.data(), c.inputs.data(), dc.taps.data(), d, seqs, states); });
  block_emulator::launch(static_cast<unsigned>(rows), kGateThreads, [&] {
    gates_block<float>(conv_out.data(), gates.data(), c.side.data(), dc.decay.data(), dc.dt_bias.data(), d);
  });
  DeltaNetChunkPlan plan;
  if (min_chunk_rows > 0) {
    plan = plan_deltanet_chunks(c.begin.data(), c.real.data(), ns, min_chunk_rows);
    seqs.chunked = plan.chunked.data();
  }
  std::vector<float> smem(static_cast<size_t>(d.k_head_dim) * (d.v_head_dim + 2));
  block_emulator::launch({static_cast<unsigned>(ns), static_cast<unsigned>(nv), 1}, (d.v_head_dim + 31) / 32 * 32,
                         [&] { delta_rule_block(o.core.data(), conv_out.data(), gates.data(), d, seqs, states, smem.data()); });
  if (plan.num_chunks() > 0) {
    const size_t rn = static_cast<size_t>(rows) * nv;
    std::vector<float> w(rn * d.k_head_dim, NAN), u(rn * d.v_head_dim, NAN), scores(rn * kDeltaNetChunk, NAN), g(rn, NAN);
    const DeltaNetChunkWork work{w.data(), u.data(), scores.data(), g.data()};
    const DeltaNetChunks chunks{plan.seq.data(), plan.seq_chunks.data(), plan.rows.data()};
    std::vector<float> prepare_smem(static_cast<size_t>(prepare_smem_floats(d)), NAN);
    block_emulator::launch({static_cast<unsigned>(plan.num_chunks()), static_cast<unsigned>(nv), 1}, kPrepareThreads,
                           [&] { chunk_prepare_block(work, conv_out.data(), gates.data(), d, chunks, prepare_smem.data()); });
    std::vector<float> state_smem(static_cast<size_t>(state_smem_floats(d)), NAN);
    const unsigned tiles = static_cast<unsigned>((d.v_head_dim + kStateCols - 1) / kStateCols);
    block_emulator::launch({static_cast<unsigned>(plan.num_chunked_seqs()), static_cast<unsigned>(nv), tiles}, kStateCols, [&] {
      chunk_state_block(o.core.data(), conv_out.data(), work, d, seqs, chunks, states, state_smem.data());
    });
  }
  block_emulator::launch({static_cast<unsigned>(rows), static_cast<unsigned>(nv), 1}, kNormThreads,
                         [&] { gated_norm_block<float>(o.out.data(), o.core.data(), c.inputs.data(), dc.norm.data(), d, 1e-6f); });
  return o;
}

// The four kernels' block code on the batch's rows, token by token; the states advance in place.
std::vector<float> run_emulated(const DeltaNetCase& dc, const RecurrentCase& c, std::vector<float>& conv_state,
                                std::vector<float>& state) {
  return run_kernels(dc, c, conv_state, state, 0).out;
}

TEST_SUITE("host") {
TEST_CASE("gated DeltaNet kernels: grouped key heads, against the float64 reference, chunked = whole") {
  DeltaNetSizes d;
  d.num_k_heads = 2;
  d.num_v_heads = 4;
  d.k_head_dim = 16;
  d.v_head_dim = 24;  // a warp with idle lanes
  d.conv_kernel = 4;
  check_deltanet_case(d, 1, run_emulated, 2e-4);
}

TEST_CASE("gated DeltaNet kernels: tiled key heads (Qwen3.5's GGUF), a longer head, a 2-tap conv") {
  DeltaNetSizes d;
  d.num_k_heads = 2;
  d.num_v_heads = 6;
  d.k_head_dim = 40;  // past a warp: the q/k norm strides
  d.v_head_dim = 40;
  d.conv_kernel = 2;
  d.tiled_heads = true;
  check_deltanet_case(d, 2, run_emulated, 2e-4);
}

TEST_CASE("gated DeltaNet kernels: a planted wrong key head is caught") {
  DeltaNetSizes d;
  d.num_k_heads = 2;
  d.num_v_heads = 4;
  d.k_head_dim = 16;
  d.v_head_dim = 16;
  d.conv_kernel = 3;
  const DeltaNetCase c = make_deltanet_case(d, 3);
  std::vector<double> conv_ref(c.batch.conv_state.begin(), c.batch.conv_state.end());
  std::vector<double> state_ref(c.batch.recurrent_state.begin(), c.batch.recurrent_state.end());
  const std::vector<double> expected = deltanet_reference(c, c.batch, conv_ref, state_ref);
  DeltaNetCase tiled = c;  // the kernels read key heads tiled, the reference grouped
  tiled.d.tiled_heads = true;
  std::vector<float> conv_state = c.batch.conv_state, state = c.batch.recurrent_state;
  CHECK(largest_diff(run_emulated(tiled, c.batch, conv_state, state), expected) > 1e-2);
}

TEST_CASE("gated DeltaNet chunk plan: real rows in chunks from the first, padding rows apart, short runs left") {
  constexpr int C = deltanet_detail::kDeltaNetChunk;
  const std::vector<int32_t> begin = {0, 1, 2 + C, 2 + C + 2 * C + 5}, real = {1, C + 1, 2 * C + 2};
  const DeltaNetChunkPlan plan = plan_deltanet_chunks(begin.data(), real.data(), 3, C);
  CHECK(plan.chunked == std::vector<int32_t>{0, 1, 1});
  CHECK(plan.seq == std::vector<int32_t>{1, 2});
  CHECK(plan.seq_chunks == std::vector<int32_t>{0, 2, 6});
  CHECK(plan.rows == std::vector<int32_t>{1, C, 1 + C, 1, 2 + C, C, 2 + 2 * C, C, 2 + 3 * C, 2, 4 + 3 * C, 3});
  CHECK(plan.num_chunks() <= max_deltanet_chunks(begin.back(), 3));
}

// The chunked delta rule on the case's rows (sequences of at least min_chunk_rows real rows) against the
// float64 reference and the token-by-token kernel, outputs before and after the norm and the final states;
// then the rows split over two steps (the second continuing the first's states) against the reference.
void check_chunked(const DeltaNetCase& dc, int min_chunk_rows, double tolerance) {
  const RecurrentCase& c = dc.batch;
  std::vector<double> conv_ref(c.conv_state.begin(), c.conv_state.end());
  std::vector<double> state_ref(c.recurrent_state.begin(), c.recurrent_state.end()), core_ref;
  const std::vector<double> out_ref = deltanet_reference(dc, c, conv_ref, state_ref, &core_ref);
  std::vector<float> conv = c.conv_state, state = c.recurrent_state;
  const DeltaNetOutputs chunked = run_kernels(dc, c, conv, state, min_chunk_rows);
  CHECK(largest_diff(chunked.core, core_ref) < tolerance);
  CHECK(largest_diff(chunked.out, out_ref) < 10 * tolerance);  // normed: values of order 1
  CHECK(largest_diff(conv, conv_ref) == 0.0);
  CHECK(largest_diff(state, state_ref) < tolerance);
  std::vector<float> conv_token = c.conv_state, state_token = c.recurrent_state;
  const DeltaNetOutputs token = run_kernels(dc, c, conv_token, state_token, 0);
  const std::vector<double> core_token(token.core.begin(), token.core.end());
  const std::vector<double> state_token_d(state_token.begin(), state_token.end());
  CHECK(largest_diff(chunked.core, core_token) < tolerance);
  CHECK(largest_diff(state, state_token_d) < tolerance);

  const int split = deltanet_detail::kDeltaNetChunk + 6;
  const RecurrentCase first = rows_of(c, 0, split), second = rows_of(c, split, 1 << 20);
  std::vector<float> conv_split = c.conv_state, state_split = c.recurrent_state;
  const DeltaNetOutputs out_first = run_kernels(dc, first, conv_split, state_split, min_chunk_rows);
  const DeltaNetOutputs out_second = run_kernels(dc, second, conv_split, state_split, min_chunk_rows);
  CHECK(largest_diff(state_split, state_ref) < tolerance);
  const int width = dc.d.value_dim();
  double split_diff = 0;
  for (int s = 0; s < c.num_seqs(); ++s) {
    for (int t = 0; t < c.begin[s + 1] - c.begin[s]; ++t) {
      const RecurrentCase& part = t < split ? first : second;
      const std::vector<float>& part_core = t < split ? out_first.core : out_second.core;
      const size_t pr = static_cast<size_t>(part.begin[s] + (t < split ? t : t - split));
      const size_t r = static_cast<size_t>(c.begin[s] + t);
      for (int i = 0; i < width; ++i) {
        split_diff = std::max(split_diff, std::abs(part_core[pr * width + i] - core_ref[r * width + i]));
      }
    }
  }
  CHECK(split_diff < tolerance);
}

DeltaNetSizes chunked_dims(int nk, int nv, int dk, int dv, bool tiled) {
  DeltaNetSizes d;
  d.num_k_heads = nk;
  d.num_v_heads = nv;
  d.k_head_dim = dk;
  d.v_head_dim = dv;
  d.conv_kernel = 4;
  d.tiled_heads = tiled;
  return d;
}

// Runs of 1, C - 1, C, C + 1 and 3C + 5 rows, a decode row, C + 6 rows of which the last 3 are padding.
constexpr int kC = deltanet_detail::kDeltaNetChunk;
const std::vector<int> kChunkedRows = {1, kC - 1, kC, kC + 1, 3 * kC + 5, 1, kC + 6};
const std::vector<int> kChunkedReal = {1, kC - 1, kC, kC + 1, 3 * kC + 5, 1, kC + 3};

TEST_CASE("chunked gated DeltaNet: every run chunked, grouped key heads, decay factors mid, near 1 and near 0") {
  const DeltaNetSizes d = chunked_dims(2, 4, 16, 24, false);  // num_v_heads = 2 num_k_heads; idle lanes
  for (const float shift : {0.0f, -9.0f, 4.0f}) {
    CAPTURE(shift);
    check_chunked(make_deltanet_case(d, 11, kChunkedRows, kChunkedReal, shift), 1, 2e-5);
  }
}

TEST_CASE("chunked gated DeltaNet: runs of C rows and more chunked, the rest token by token; two column tiles") {
  const DeltaNetSizes d = chunked_dims(2, 6, 40, 40, true);  // tiled key heads; a second, partial tile of S
  check_chunked(make_deltanet_case(d, 12, kChunkedRows, kChunkedReal), kC, 2e-5);
}

}  // TEST_SUITE("host")

}  // namespace
}  // namespace cbatch::test
