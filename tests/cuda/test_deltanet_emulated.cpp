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

TEST_CASE("chunked gated DeltaNet: every run chunked, grouped key heads, decay factors mid, near 1 and near 0") {
  const DeltaNetSizes d = deltanet_dims(2, 4, 16, 24, false);  // num_v_heads = 2 num_k_heads; idle lanes
  for (const float shift : {0.0f, -9.0f, 4.0f}) {
    CAPTURE(shift);
    check_chunked_deltanet_case(make_chunked_deltanet_case(d, 11, shift), run_kernels, 1, 2e-5);
  }
}

TEST_CASE("chunked gated DeltaNet: runs of C rows and more chunked, the rest token by token; two column tiles") {
  const DeltaNetSizes d = deltanet_dims(2, 6, 40, 40, true);  // tiled key heads; a second, partial tile of S
  check_chunked_deltanet_case(make_chunked_deltanet_case(d, 12), run_kernels, deltanet_detail::kDeltaNetChunk, 2e-5);
}

}  // TEST_SUITE("host")

}  // namespace
}  // namespace cbatch::test
