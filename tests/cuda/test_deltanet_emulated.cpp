// The block code of the gated DeltaNet kernels (deltanet_block.cuh) run on the CPU by the block emulator,
// against deltanet_case.hpp's float64 reference, with key heads grouped and tiled. Three sequences of
// different lengths share the batch (recurrent_case.hpp), one with padding rows (static mode), and their states
// start non-zero; the same rows split over two steps leave the same states and outputs bit for bit as one
// step, and padding rows leave the state as it was. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tests/cuda/deltanet_case.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/deltanet_block.cuh"

namespace cbatch::test {
namespace {

// The four kernels' block code on the batch's rows; the states advance in place.
std::vector<float> run_emulated(const DeltaNetCase& dc, const RecurrentCase& c, std::vector<float>& conv_state,
                                std::vector<float>& state) {
  const DeltaNetSizes& d = dc.d;
  const int rows = c.num_rows(), ns = c.num_seqs();
  std::vector<float> conv_out(static_cast<size_t>(rows) * d.conv_dim()), gates(static_cast<size_t>(rows) * 2 * d.num_v_heads);
  std::vector<float> core(static_cast<size_t>(rows) * d.value_dim()), out(core.size());
  const DeltaNetSeqs seqs = c.seqs();
  const DeltaNetStates states{conv_state.data(), state.data(), c.conv_stride, c.recurrent_stride};
  using namespace deltanet_detail;
  const unsigned conv_blocks = static_cast<unsigned>((d.conv_dim() + kConvThreads - 1) / kConvThreads);
  block_emulator::launch({static_cast<unsigned>(ns), conv_blocks, 1}, kConvThreads,
                         [&] { conv_block<float>(conv_out.data(), c.inputs.data(), dc.taps.data(), d, seqs, states); });
  block_emulator::launch(static_cast<unsigned>(rows), kGateThreads, [&] {
    gates_block<float>(conv_out.data(), gates.data(), c.side.data(), dc.decay.data(), dc.dt_bias.data(), d);
  });
  std::vector<float> smem(static_cast<size_t>(d.k_head_dim) * (d.v_head_dim + 2));
  block_emulator::launch({static_cast<unsigned>(ns), static_cast<unsigned>(d.num_v_heads), 1}, (d.v_head_dim + 31) / 32 * 32,
                         [&] { delta_rule_block(core.data(), conv_out.data(), gates.data(), d, seqs, states, smem.data()); });
  block_emulator::launch({static_cast<unsigned>(rows), static_cast<unsigned>(d.num_v_heads), 1}, kNormThreads,
                         [&] { gated_norm_block<float>(out.data(), core.data(), c.inputs.data(), dc.norm.data(), d, 1e-6f); });
  return out;
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

}  // TEST_SUITE("host")

}  // namespace
}  // namespace cbatch::test
