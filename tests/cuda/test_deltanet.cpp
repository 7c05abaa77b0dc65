// The gated DeltaNet launchers (deltanet.hpp) on the GPU against deltanet_case.hpp's float64 reference, with
// the projections in fp32 and in bf16 (the case's inputs rounded to bf16 first, so that the reference sees
// the values the kernels read), key heads grouped and tiled, Qwen3.5's 128 x 128 heads (past 48 KB of shared
// memory); the same rows split over two steps leave the same states and outputs bit for bit. The chunked
// launcher (deltanet_chunked.hpp) against the token-by-token one and the reference, on the chunked case
// (deltanet_case.hpp: runs of 1 to 3C + 5 rows, a decode row, padding), at the test's and Qwen3.5's sizes.
// test_deltanet_emulated.cpp runs the block code of the same kernels on the CPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "cuda/recurrent/deltanet.hpp"
#include "cuda/recurrent/deltanet_chunk_plan.hpp"
#include "cuda/recurrent/deltanet_chunked.hpp"
#include "tests/cuda/deltanet_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

// The four launchers on the case's rows in T, the sequences of at least min_chunk_rows real rows on the
// chunked delta rule (0: none); the states advance in place.
template <typename T>
DeltaNetOutputs run_launchers(const DeltaNetCase& dc, const RecurrentCase& c, std::vector<float>& conv_state,
                              std::vector<float>& state, int min_chunk_rows) {
  const DeltaNetSizes& d = dc.d;
  const int rows = c.num_rows(), ns = c.num_seqs();
  const cudaStream_t stream = nullptr;
  DeviceBuffer<T> proj = to_device<T>(c.inputs), ba = to_device<T>(c.side);
  DeviceBuffer<float> taps = to_device<float>(dc.taps), decay = to_device<float>(dc.decay);
  DeviceBuffer<float> dt_bias = to_device<float>(dc.dt_bias), norm = to_device<float>(dc.norm);
  DeviceBuffer<float> conv = to_device<float>(conv_state), rec = to_device<float>(state);
  DeviceBuffer<int32_t> begin = to_device_i32(c.begin), real = to_device_i32(c.real), slot = to_device_i32(c.slot);
  DeviceBuffer<float> conv_out(static_cast<size_t>(rows) * d.conv_dim());
  DeviceBuffer<float> gates(static_cast<size_t>(rows) * 2 * d.num_v_heads);
  DeviceBuffer<float> core(static_cast<size_t>(rows) * d.value_dim());
  DeviceBuffer<T> out(static_cast<size_t>(rows) * d.value_dim());
  poison(conv_out);
  poison(core);
  const DeltaNetChunkPlan plan = plan_deltanet_chunks(c.begin.data(), c.real.data(), ns, std::max(min_chunk_rows, 1));
  const bool chunked = min_chunk_rows > 0 && plan.num_chunks() > 0;
  DeviceBuffer<int32_t> seq_chunked = to_device_i32(plan.chunked), chunk_seq = to_device_i32(plan.seq);
  DeviceBuffer<int32_t> seq_chunks = to_device_i32(plan.seq_chunks), chunk_rows = to_device_i32(plan.rows);
  const size_t heads = static_cast<size_t>(rows) * d.num_v_heads;
  DeviceBuffer<float> w(heads * d.k_head_dim), u(heads * d.v_head_dim), scores(heads * deltanet_detail::kDeltaNetChunk);
  DeviceBuffer<float> log_decay(heads);
  const DeltaNetSeqs seqs{begin.get(), real.get(), slot.get(), chunked ? seq_chunked.get() : nullptr};
  const DeltaNetStates states{conv.get(), rec.get(), c.conv_stride, c.recurrent_stride};
  deltanet_conv<T>(conv_out.get(), proj.get(), taps.get(), d, seqs, ns, states, stream);
  deltanet_gates<T>(conv_out.get(), gates.get(), ba.get(), decay.get(), dt_bias.get(), d, rows, stream);
  deltanet_delta_rule(core.get(), conv_out.get(), gates.get(), d, seqs, ns, states, stream);
  if (chunked) {
    deltanet_chunked_delta_rule(core.get(), conv_out.get(), gates.get(),
                                {w.get(), u.get(), scores.get(), log_decay.get()}, d, seqs,
                                {chunk_seq.get(), seq_chunks.get(), chunk_rows.get()}, plan.num_chunked_seqs(),
                                plan.num_chunks(), states, stream);
  }
  deltanet_gated_norm<T>(out.get(), core.get(), proj.get(), norm.get(), d, rows, 1e-6f, stream);
  conv_state = to_host(conv);
  state = to_host(rec);
  return {to_host(core), to_host(out)};
}

template <typename T>
std::vector<float> run_device(const DeltaNetCase& dc, const RecurrentCase& c, std::vector<float>& conv_state,
                              std::vector<float>& state) {
  return run_launchers<T>(dc, c, conv_state, state, 0).out;
}

DeltaNetSizes dims(int nk, int nv, int dk, int dv, int kernel, bool tiled) {
  DeltaNetSizes d;
  d.num_k_heads = nk;
  d.num_v_heads = nv;
  d.k_head_dim = dk;
  d.v_head_dim = dv;
  d.conv_kernel = kernel;
  d.tiled_heads = tiled;
  return d;
}

TEST_CASE_TEMPLATE("gated DeltaNet launchers on the GPU: the float64 reference, chunked = whole", T, float,
                   __nv_bfloat16) {
  const double tolerance = std::is_same_v<T, float> ? 2e-4 : 2e-2;  // bf16 outputs: 8 bits of mantissa
  float (*round)(float) = [](float x) { return to_f32(from_f32<T>(x)); };
  check_deltanet_case(dims(2, 4, 16, 24, 4, false), 1, run_device<T>, tolerance, round);
  check_deltanet_case(dims(2, 6, 40, 40, 2, true), 2, run_device<T>, tolerance, round);
  check_deltanet_case(dims(2, 4, 128, 128, 4, true), 3, run_device<T>, tolerance, round);  // Qwen3.5's heads
}

TEST_CASE("chunked gated DeltaNet launcher on the GPU: the token-by-token launcher and the float64 reference") {
  const auto run = [](const DeltaNetCase& dc, const RecurrentCase& c, std::vector<float>& conv_state,
                      std::vector<float>& state, int min_chunk_rows) {
    return run_launchers<float>(dc, c, conv_state, state, min_chunk_rows);
  };
  for (const float shift : {0.0f, -9.0f, 4.0f}) {  // decay factors mid, near 1, near 0
    CAPTURE(shift);
    check_chunked_deltanet_case(make_chunked_deltanet_case(deltanet_dims(2, 4, 16, 24, false), 21, shift), run, 1,
                                2e-5);
  }
  check_chunked_deltanet_case(make_chunked_deltanet_case(deltanet_dims(2, 6, 40, 40, true), 22), run,
                              deltanet_detail::kDeltaNetChunk, 2e-5);
  // Qwen3.5's 128 x 128 heads (past 48 KB of shared memory in both chunked kernels), grouped.
  check_chunked_deltanet_case(make_chunked_deltanet_case(deltanet_dims(2, 4, 128, 128, true), 23), run,
                              deltanet_detail::kDeltaNetChunk, 5e-5);
}

}  // namespace
}  // namespace cbatch::test
