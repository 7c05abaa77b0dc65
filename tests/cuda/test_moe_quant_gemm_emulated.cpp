// The block code of the grouped GEMM over quantized expert weights (moe_quant_gemm_block.cuh) run on the CPU
// by the block emulator and the emulated cp.async / ldmatrix / mma, against moe_quant_case.hpp's float64
// reference on the dequantised weights: bf16 and fp16; MXFP4, Q8_0 and per-row FP8 weights; uneven expert
// segments (empty experts, segments past one tile and not a multiple of it, more experts than one warp's
// scan chunk); n and k past whole tiles; the grid's upper bound of row tiles, whose surplus CTAs must write
// nothing (rows past the picks stay poisoned). The emulator must see no misuse of cp.async.
// test_moe.cpp runs the same cases through the launcher on the GPU. Part of the host suite.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/cuda/moe_quant_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "tests/cuda/warp_mma_emulator.hpp"
#include "cuda/moe_quant_gemm_block.cuh"

namespace cbatch::test {
namespace {

using namespace moe_quant_detail;

constexpr int kPoisonRows = 3;  // rows of y past the picks, which no CTA may write

// Runs the block code over the grid moe_quant_gemm.cu launches and returns y (num_picks + kPoisonRows, n).
template <typename T, class W>
std::vector<T> emulate_quant_gemm(const QuantGemmCase& qc, const std::vector<T>& x, const W& w,
                                  const std::vector<int32_t>& offsets) {
  const int num_picks = offsets.back();
  std::vector<T> y(static_cast<size_t>(num_picks + kPoisonRows) * qc.n, from_f32<T>(NAN));
  const QuantGemmArgs<T, W> args{y.data(), x.data(), w, offsets.data(), qc.num_experts, qc.n, qc.k};
  const size_t smem_bytes = moe_quant_gemm_smem_bytes<T>();
  std::vector<Bytes16> smem(smem_bytes / sizeof(Bytes16));
  auto* s = reinterpret_cast<unsigned char*>(smem.data());
  warp_mma::begin_launch(s, smem_bytes, {{x.data(), x.size() * sizeof(T)}});
  const block_emulator::Index grid{static_cast<unsigned>(moe_quant_gemm_tiles(num_picks, qc.num_experts)),
                                   static_cast<unsigned>((qc.n + kQgBn - 1) / kQgBn), 1};
  block_emulator::launch(grid, kQgThreads, [&] { moe_quant_gemm_block<T, W>(args, s); },
                         [](block_emulator::Index) { warp_mma::begin_block(); });
  warp_mma::end_launch();
  CHECK(warp_mma::memory().error == "");
  return y;
}

template <typename T>
void check_quant_gemm_emulated(const QuantGemmCase& qc, QuantFormat format) {
  const std::vector<int32_t> offsets = quant_offsets(qc.rows);
  const int num_picks = offsets.back();
  const QuantExperts q = make_quant_experts(format, qc.num_experts, qc.n, qc.k, 11 + qc.n + qc.k);
  const std::vector<float> x = round_to<T>(random_vector(static_cast<size_t>(num_picks) * qc.k, 5));
  std::vector<T> x_t(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_t[i] = from_f32<T>(x[i]);
  std::vector<T> y;
  if (format == QuantFormat::kMxfp4) {
    y = emulate_quant_gemm<T>(qc, x_t, BlockWeights<BlockFormat<DType::kMXFP4>>{q.bytes.data()}, offsets);
  } else if (format == QuantFormat::kQ8_0) {
    y = emulate_quant_gemm<T>(qc, x_t, BlockWeights<BlockFormat<DType::kQ8_0>>{q.bytes.data()}, offsets);
  } else {
    y = emulate_quant_gemm<T>(qc, x_t, Fp8RowWeights{q.bytes.data(), q.scales.data()}, offsets);
  }
  const std::vector<double> want = quant_gemm_ref(x, q, offsets, qc.n, qc.k);
  const size_t out = want.size();
  std::vector<float> got(out);
  for (size_t i = 0; i < out; ++i) got[i] = to_f32(y[i]);
  size_t written_past = 0;
  for (size_t i = out; i < y.size(); ++i) written_past += !std::isnan(to_f32(y[i]));
  CHECK(written_past == 0);
  if (out > 0) CHECK(rel_error(got, want) < quant_gemm_tolerance(std::is_same_v<T, __nv_bfloat16>));
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE_TEMPLATE("moe quantized expert GEMM's block code: MXFP4, Q8_0 and per-row FP8 weights dequantised in "
                     "the load path, uneven and empty experts, surplus CTAs (emulated)", T, __nv_bfloat16, __half) {
    for (QuantFormat format : {QuantFormat::kMxfp4, QuantFormat::kQ8_0, QuantFormat::kFp8Row}) {
      for (const QuantGemmCase& qc : quant_gemm_cases()) {
        const std::string name = quant_format_name(format);
        CAPTURE(name);
        CAPTURE(qc.num_experts);
        CAPTURE(qc.n);
        CAPTURE(qc.k);
        check_quant_gemm_emulated<T>(qc, format);
      }
    }
  }
}

}  // namespace cbatch::test
