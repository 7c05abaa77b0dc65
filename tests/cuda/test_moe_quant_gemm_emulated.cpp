// The block code of the grouped GEMM over quantized expert weights (moe_quant_gemm_block.cuh) run on the CPU
// by the block emulator and the emulated cp.async / ldmatrix / mma, against moe_quant_case.hpp's float64
// reference on the dequantised weights: bf16 and fp16; MXFP4, Q8_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and
// per-row FP8 weights (and the K-quant pieces bit for bit against the host decoders); uneven expert
// segments (empty experts, segments past one tile and not a multiple of it, more experts than one warp's
// scan chunk); n and k past whole tiles; the grid's upper bound of row tiles, whose surplus CTAs must write
// nothing (rows past the picks stay poisoned). The emulator must see no misuse of cp.async.
// test_moe.cpp runs the same cases through the launcher on the GPU. Then a dense linear layer's use of it
// (quant_blocks_gemm, one expert, offsets {0, m}): every block type it reads (FP8 and NVFP4 too) decoded into
// the weight tile bit for bit as the engine's dequantize_blocks, and the product against float64 for m = 1, 7,
// 16 on layer-sized k (4096, and the 8B's down projection's 14336), k split over the grid's z as the runner splits
// it (fp32 partial sums, split_k_reduce) and not. Part of the host suite.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/moe/moe_quant_gemm.hpp"
#include "tests/cuda/linear_blocks_case.hpp"
#include "tests/cuda/moe_quant_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "tests/cuda/warp_mma_emulator.hpp"
#include "cuda/moe/moe_quant_gemm_block.cuh"

namespace cbatch::test {
namespace {

using namespace moe_quant_detail;

constexpr int kPoisonRows = 3;  // rows of y past the picks, which no CTA may write

// Runs the block code over the grid moe_quant_gemm.cu launches and returns y (num_picks + kPoisonRows, n); with
// splits > 1 (one expert: quant_blocks_gemm_split_k) over the splits of k along z into fp32 partial sums (poisoned
// first), then split_k_reduce over y's elements.
template <typename T, class W>
std::vector<T> emulate_quant_gemm(const QuantGemmCase& qc, const std::vector<T>& x, const W& w,
                                  const std::vector<int32_t>& offsets, int splits = 1) {
  const int num_picks = offsets.back();
  std::vector<T> y(static_cast<size_t>(num_picks + kPoisonRows) * qc.n, from_f32<T>(NAN));
  QuantGemmArgs<T, W> args{y.data(), x.data(), w, offsets.data(), qc.num_experts, qc.n, qc.k};
  const int k_tiles = (qc.k + kQgBk - 1) / kQgBk, per = (k_tiles + splits - 1) / splits;
  splits = (k_tiles + per - 1) / per;  // as the launcher: no empty split
  const size_t elems = static_cast<size_t>(num_picks) * qc.n;
  std::vector<float> partial(static_cast<size_t>(splits) * elems, NAN);
  if (splits > 1) {
    args.split_k_tiles = per;
    args.partial = partial.data();
  }
  const size_t smem_bytes = moe_quant_gemm_smem_bytes<T>();
  std::vector<Bytes16> smem(smem_bytes / sizeof(Bytes16));
  auto* s = reinterpret_cast<unsigned char*>(smem.data());
  warp_mma::begin_launch(s, smem_bytes, {{x.data(), x.size() * sizeof(T)}});
  const block_emulator::Index grid{static_cast<unsigned>(moe_quant_gemm_tiles(num_picks, qc.num_experts)),
                                   static_cast<unsigned>((qc.n + kQgBn - 1) / kQgBn), static_cast<unsigned>(splits)};
  block_emulator::launch(grid, kQgThreads, [&] { moe_quant_gemm_block<T, W>(args, s); },
                         [](block_emulator::Index) { warp_mma::begin_block(); });
  warp_mma::end_launch();
  CHECK(warp_mma::memory().error == "");
  if (splits > 1) {
    for (size_t i = 0; i < elems; ++i) split_k_reduce(y.data(), partial.data(), splits, elems, i);
  }
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
  const uint8_t* bytes = q.bytes.data();
  auto run = [&](const auto& w) { return emulate_quant_gemm<T>(qc, x_t, w, offsets); };
  std::vector<T> y;
  switch (format) {  // the launcher's choice (moe_quant_gemm.cu)
    case QuantFormat::kMxfp4: y = run(BlockWeights<BlockFormat<DType::kMXFP4>>{bytes}); break;
    case QuantFormat::kQ8_0: y = run(BlockWeights<BlockFormat<DType::kQ8_0>>{bytes}); break;
    case QuantFormat::kQ4_1: y = run(BlockWeights<BlockFormat<DType::kQ4_1>>{bytes}); break;
    case QuantFormat::kQ5_0: y = run(BlockWeights<BlockFormat<DType::kQ5_0>>{bytes}); break;
    case QuantFormat::kQ4_K: y = run(KQuant45Weights<false>{bytes}); break;
    case QuantFormat::kQ5_K: y = run(KQuant45Weights<true>{bytes}); break;
    case QuantFormat::kQ6_K: y = run(Q6KWeights{bytes}); break;
    case QuantFormat::kFp8Row: y = run(Fp8RowWeights{bytes, q.scales.data()}); break;
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

// Every 32-element piece of random superblocks, decoded by the GEMM's Piece, equals the host decoder's
// value bit for bit.
template <class F, class Piece>
void check_pieces(QuantFormat format) {
  const QuantExperts q = make_quant_experts(format, 1, 16, 256, 3);
  size_t mismatches = 0;
  for (int b = 0; b < 16; ++b) {
    const uint8_t* block = q.bytes.data() + static_cast<size_t>(b) * F::kBytes;
    for (int p = 0; p < 8; ++p) {
      typename Piece::Raw raw;
      Piece::load(raw, block, p);
      Piece::decode(raw, p, [&](int l, float v) {
        const float want = block_element<F>(block, 32 * p + l);
        mismatches += std::memcmp(&v, &want, sizeof(float)) != 0;
      });
    }
  }
  CHECK(mismatches == 0);
}

// fn(W) for the weight reader the launcher picks for `dtype` (moe_quant_gemm.cu's launch_blocks).
template <class Fn>
void with_block_weights(DType dtype, const uint8_t* q, Fn&& fn) {
  switch (dtype) {
    case DType::kQ4_K: return fn(KQuant45Weights<false>{q});
    case DType::kQ5_K: return fn(KQuant45Weights<true>{q});
    case DType::kQ6_K: return fn(Q6KWeights{q});
    default:
      return with_block_format(dtype, [&](auto format) {
        if constexpr (decltype(format)::kElems == 32) fn(BlockWeights<decltype(format)>{q});
      });
  }
}

// The weight tile (kQgBn rows, kQgBk) at (n0, k0) of blocks (n, k), as the CTA's threads load and store it, equals
// the engine's values rounded to T bit for bit (zeros past n).
template <typename T, class W>
size_t tile_mismatches(const W& w, const std::vector<float>& values, int n, int k, int n0, int k0) {
  std::vector<T> s_w(static_cast<size_t>(kQgBn) * kQgLd, from_f32<T>(NAN));
  for (int tid = 0; tid < kQgThreads; ++tid) {
    typename W::Regs regs;
    w.load(regs, 0, n, k, n0, k0, tid);
    w.template store<T>(regs, s_w.data(), tid);
  }
  size_t mismatches = 0;
  for (int r = 0; r < kQgBn; ++r) {
    for (int c = 0; c < kQgBk; ++c) {
      const bool inside = n0 + r < n && k0 + c < k;
      const float want = inside ? to_f32(from_f32<T>(values[static_cast<size_t>(n0 + r) * k + k0 + c])) : 0.0f;
      const float got = to_f32(s_w[static_cast<size_t>(r) * kQgLd + c]);
      mismatches += std::memcmp(&got, &want, sizeof(float)) != 0;
    }
  }
  return mismatches;
}

// y (m, n) = x (m, k) W^T with W (n, k) in blocks of `dtype`, as quant_blocks_gemm_split_k runs it (one expert, k
// in `splits`), against the float64 product of the engine's values.
template <typename T>
void check_linear_blocks_gemm(DType dtype, int m, int n, int k, int splits) {
  CAPTURE(splits);
  std::vector<float> values;
  const std::vector<uint8_t> bytes = linear_blocks(dtype, n, k, 7 + static_cast<unsigned>(m + n), values);
  const std::vector<float> x = round_to<T>(cbatch::testing::random_activations(static_cast<size_t>(m) * k, 5 + m));
  std::vector<T> x_t(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_t[i] = from_f32<T>(x[i]);
  const QuantGemmCase qc{1, n, k, {m}};
  const std::vector<int32_t> offsets = quant_offsets(qc.rows);
  std::vector<T> y;
  with_block_weights(dtype, bytes.data(), [&](const auto& w) {
    y = emulate_quant_gemm<T>(qc, x_t, w, offsets, splits);
  });
  QuantExperts q{QuantFormat::kQ8_0, {}, {}, values};
  const std::vector<double> want = quant_gemm_ref(x, q, offsets, n, k);
  std::vector<float> got(want.size());
  for (size_t i = 0; i < want.size(); ++i) got[i] = to_f32(y[i]);
  size_t written_past = 0;
  for (size_t i = want.size(); i < y.size(); ++i) written_past += !std::isnan(to_f32(y[i]));
  CHECK(written_past == 0);
  CHECK(rel_error(got, want) < quant_gemm_tolerance(std::is_same_v<T, __nv_bfloat16>));
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE_TEMPLATE("linear blocks: the block GEMM's weight tile holds the engine's values of every block type it "
                     "reads, FP8 and NVFP4 included, bit for bit (emulated)", T, __nv_bfloat16, __half) {
    for (DType dtype : kLinearBlockTypes) {
      CAPTURE(dtype_name(dtype));
      const int n = 100, k = 2 * 256;  // a partial column tile; two superblocks a row
      std::vector<float> values;
      const std::vector<uint8_t> bytes = linear_blocks(dtype, n, k, 3, values);
      with_block_weights(dtype, bytes.data(), [&](const auto& w) {
        for (const int k0 : {0, 192, 448}) {  // the first k tile, the last of a superblock, the last of the row
          CHECK(tile_mismatches<T>(w, values, n, k, 0, k0) == 0);
          CHECK(tile_mismatches<T>(w, values, n, k, 64, k0) == 0);  // rows 64..99, then zeros
        }
      });
    }
  }

  TEST_CASE("linear blocks: one-expert block GEMM against float64 at m = 1, 7, 16 on a layer's n and k, every "
            "block type, k split as an H200's 132 SMs split it and not split (emulated)") {
    // The splits the runner takes on 132 SMs: 8 for these n of a few column tiles (8, 3 and 28 k tiles each).
    const int splits_4096 = quant_gemm_k_splits(192, 4096, 132), splits_1536 = quant_gemm_k_splits(72, 1536, 132);
    CHECK(splits_4096 == 8);
    CHECK(splits_1536 == 8);
    CHECK(quant_gemm_k_splits(64, 14336, 132) == 8);
    CHECK(quant_gemm_k_splits(28672, 4096, 132) == 1);  // the 8B's gate|up: 448 column tiles
    CHECK(quant_gemm_k_splits(4096, 4096, 132) == 5);   // its o: 64 column tiles, 5 splits of 13 k tiles
    for (DType dtype : kLinearBlockTypes) {
      CAPTURE(dtype_name(dtype));
      for (const int m : {1, 7, 16}) {
        CAPTURE(m);
        const bool split = m != 7;                      // m = 7: the unsplit path (one CTA over the whole k)
        check_linear_blocks_gemm<__nv_bfloat16>(dtype, m, 192, 4096, split ? splits_4096 : 1);  // an 8B's k
        check_linear_blocks_gemm<__half>(dtype, m, 72, 1536, split ? splits_1536 : 1);        // n past whole tiles
      }
      check_linear_blocks_gemm<__nv_bfloat16>(dtype, 16, 64, 14336, 8);  // k: the 8B's down projection
    }
  }


  TEST_CASE("moe quantized expert GEMM: the Q4_K, Q5_K and Q6_K pieces decode as the host's decoders do") {
    check_pieces<BlockFormat<DType::kQ4_K>, KQuant45Piece<false>>(QuantFormat::kQ4_K);
    check_pieces<BlockFormat<DType::kQ5_K>, KQuant45Piece<true>>(QuantFormat::kQ5_K);
    check_pieces<BlockFormat<DType::kQ6_K>, Q6KPiece>(QuantFormat::kQ6_K);
  }

  TEST_CASE_TEMPLATE("moe quantized expert GEMM's block code: GGUF blocks (32-element, K-quant superblocks) and "
                     "per-row FP8 weights dequantised in the load path, uneven and empty experts, surplus CTAs "
                     "(emulated)", T, __nv_bfloat16, __half) {
    for (QuantFormat format : kQuantFormats) {
      for (const QuantGemmCase& qc : quant_gemm_cases(format)) {
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
