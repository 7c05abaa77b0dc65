// Inputs and the float64 reference of the grouped GEMM over quantized expert weights (moe_quant_gemm),
// shared by the emulated block code (test_moe_quant_gemm_emulated.cpp) and the GPU launcher (test_moe.cpp):
// the experts' weights in GGUF blocks (MXFP4, Q8_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K) or as FP8 E4M3 codes with
// a scale per row, their dequantised values through the host's own decoders, and uneven expert segments
// (empty experts, segments longer than a tile and not a multiple of it).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/model/fp8.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch::test {

enum class QuantFormat { kMxfp4, kQ8_0, kQ4_1, kQ5_0, kQ4_K, kQ5_K, kQ6_K, kFp8Row };

// The block type of a format; kF32 for FP8 rows.
inline DType quant_format_dtype(QuantFormat f) {
  switch (f) {
    case QuantFormat::kMxfp4: return DType::kMXFP4;
    case QuantFormat::kQ8_0: return DType::kQ8_0;
    case QuantFormat::kQ4_1: return DType::kQ4_1;
    case QuantFormat::kQ5_0: return DType::kQ5_0;
    case QuantFormat::kQ4_K: return DType::kQ4_K;
    case QuantFormat::kQ5_K: return DType::kQ5_K;
    case QuantFormat::kQ6_K: return DType::kQ6_K;
    case QuantFormat::kFp8Row: break;
  }
  return DType::kF32;
}

inline std::string quant_format_name(QuantFormat f) {
  return f == QuantFormat::kFp8Row ? "fp8" : std::string(dtype_name(quant_format_dtype(f)));
}

inline constexpr QuantFormat kQuantFormats[] = {QuantFormat::kMxfp4, QuantFormat::kQ8_0, QuantFormat::kQ4_1,
                                                QuantFormat::kQ5_0,  QuantFormat::kQ4_K, QuantFormat::kQ5_K,
                                                QuantFormat::kQ6_K,  QuantFormat::kFp8Row};

struct QuantGemmCase {
  int num_experts, n, k;
  std::vector<int> rows;  // (num_experts) each expert's rows
};

// Cases for a format: k a multiple of its block (32, or the K-quants' 256: several superblocks a row, so
// every piece of a superblock and blocks past the first are read).
inline std::vector<QuantGemmCase> quant_gemm_cases(QuantFormat format) {
  std::vector<int> sparse(40, 0);  // more than one warp's chunk of experts, most of them empty
  sparse[0] = 3, sparse[33] = 33, sparse[39] = 1;
  const bool superblocks = format != QuantFormat::kFp8Row && dtype_block_elems(quant_format_dtype(format)) == 256;
  const int k_unit = superblocks ? 256 : 32;
  return {
      {6, 100, 3 * k_unit, {5, 0, 37, 16, 0, 1}},  // n, k past whole tiles; a 2-tile and an empty expert
      {40, 72, 5 * k_unit, sparse},
      {4, 130, (superblocks ? 2 : 7) * k_unit, {1, 1, 1, 1}},  // a decode step: one row each
      {3, 64, 2 * k_unit, {0, 0, 0}},               // no rows: every CTA surplus
  };
}

// Random blocks of a type with scale fields of sane size: each fp16 field (byte offset) gets a random
// sign and mantissa in the binade 2^exponent, so the weights stay below about 1 whatever the other bytes.
struct HalfField {
  int offset, exponent;
};
inline std::vector<HalfField> half_fields(DType dtype) {
  switch (dtype) {
    case DType::kQ4_1: return {{0, -5}, {2, -2}};   // d * q + m, q < 16
    case DType::kQ5_0: return {{0, -5}};            // d * (q - 16)
    case DType::kQ4_K:
    case DType::kQ5_K: return {{0, -10}, {2, -10}};  // d * sc * q - dmin * m, sc, m < 64, q < 32
    case DType::kQ6_K: return {{208, -14}};          // d * sc * (q - 32), |sc| <= 128
    default: return {};
  }
}

inline std::vector<int32_t> quant_offsets(const std::vector<int>& rows) {
  std::vector<int32_t> offsets(1, 0);
  for (int m : rows) offsets.push_back(offsets.back() + m);
  return offsets;
}

// Experts (num_experts, n, k) in `format`: bytes are blocks (E, n, row_bytes(type, k)) or FP8 codes (E, n, k),
// scales (E, n) the FP8 rows' scales, dequant (E, n, k) the exact values the product should use.
struct QuantExperts {
  QuantFormat format;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<float> dequant;
};

// MXFP4 block exponents are drawn from [exponent_lo, exponent_lo + exponent_span] (scales 2^(e - 127)).
inline QuantExperts make_quant_experts(QuantFormat format, int num_experts, int n, int k, uint32_t seed,
                                       int exponent_lo = 121, int exponent_span = 8) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  QuantExperts q{format, {}, {}, {}};
  const size_t rows = static_cast<size_t>(num_experts) * n, elems = rows * static_cast<size_t>(k);
  q.dequant.resize(elems);
  if (format == QuantFormat::kFp8Row) {
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    q.bytes.resize(elems);
    q.scales.resize(rows);
    for (float& s : q.scales) s = scale(rng);
    for (size_t i = 0; i < elems; ++i) {
      uint8_t c = static_cast<uint8_t>(byte(rng));
      if ((c & 0x7F) == 0x7F) c ^= 1;  // not NaN
      q.bytes[i] = c;
      q.dequant[i] = fp8_e4m3_to_float(c) * q.scales[i / static_cast<size_t>(k)];
    }
    return q;
  }
  const size_t blocks = elems / 32;  // of 32 elements
  if (format == QuantFormat::kMxfp4) {
    std::uniform_int_distribution<int> exponent(exponent_lo, exponent_lo + exponent_span);  // 121: values 2^-7 .. 24 in fp16
    q.bytes.resize(blocks * 17);
    for (size_t b = 0; b < blocks; ++b) {
      q.bytes[b * 17] = static_cast<uint8_t>(exponent(rng));
      for (int i = 1; i < 17; ++i) q.bytes[b * 17 + i] = static_cast<uint8_t>(byte(rng));
    }
    dequantize_blocks(DType::kMXFP4, q.bytes.data(), static_cast<int64_t>(blocks), q.dequant.data());
  } else if (format != QuantFormat::kQ8_0) {
    const DType dtype = quant_format_dtype(format);
    const size_t block_bytes = static_cast<size_t>(dtype_block_bytes(dtype));
    const size_t num_blocks = elems / static_cast<size_t>(dtype_block_elems(dtype));
    q.bytes.resize(num_blocks * block_bytes);
    for (uint8_t& b : q.bytes) b = static_cast<uint8_t>(byte(rng));
    for (size_t b = 0; b < num_blocks; ++b) {
      for (const HalfField& f : half_fields(dtype)) {
        const int sign = byte(rng) & 1, mantissa_high = byte(rng), mantissa_low = byte(rng) & 3;
        const int bits = sign << 15 | (15 + f.exponent) << 10 | mantissa_high << 2 | mantissa_low;
        q.bytes[b * block_bytes + static_cast<size_t>(f.offset)] = static_cast<uint8_t>(bits & 0xFF);
        q.bytes[b * block_bytes + static_cast<size_t>(f.offset) + 1] = static_cast<uint8_t>(bits >> 8);
      }
    }
    dequantize_blocks(dtype, q.bytes.data(), static_cast<int64_t>(num_blocks), q.dequant.data());
  } else {
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    std::vector<float> w(elems);
    for (float& x : w) x = u(rng);
    q.bytes.resize(blocks * 34);
    quantize_q8_0(w.data(), static_cast<int64_t>(elems), q.bytes.data());
    dequantize_blocks(DType::kQ8_0, q.bytes.data(), static_cast<int64_t>(blocks), q.dequant.data());
  }
  return q;
}

// y (num_picks, n) = each expert's rows of x (num_picks, k) times its dequantised weights, in float64.
inline std::vector<double> quant_gemm_ref(const std::vector<float>& x, const QuantExperts& w,
                                          const std::vector<int32_t>& offsets, int n, int k) {
  const size_t num_picks = static_cast<size_t>(offsets.back());
  std::vector<double> y(num_picks * static_cast<size_t>(n));
  for (size_t e = 0; e + 1 < offsets.size(); ++e) {
    for (int r = offsets[e]; r < offsets[e + 1]; ++r) {
      for (int c = 0; c < n; ++c) {
        const float* wr = &w.dequant[(e * static_cast<size_t>(n) + static_cast<size_t>(c)) * k];
        const float* xr = &x[static_cast<size_t>(r) * k];
        double sum = 0.0;
        for (int i = 0; i < k; ++i) sum += static_cast<double>(xr[i]) * wr[i];
        y[static_cast<size_t>(r) * n + c] = sum;
      }
    }
  }
  return y;
}

// The tolerance of ||y - ref|| / ||ref|| for outputs in T, whose unit roundoff u is 2^-8 (bf16) or 2^-11
// (fp16): y is rounded to T once (|error| <= u |y|, about u / 2 in the norm); the block types' weights
// once each (to T, errors of random sign that add to below u ||y||); MXFP4 and FP8 weights and x are exact in
// T, and fp32 accumulation adds about k 2^-24. The emulated runs measure 0.4-0.6 u; 1.5 u leaves room and a
// planted bug (nibble order, a scale off by one exponent) misses it by orders of magnitude.
inline double quant_gemm_tolerance(bool bf16) { return 1.5 * (bf16 ? 0x1p-8 : 0x1p-11); }

}  // namespace cbatch::test
