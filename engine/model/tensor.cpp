// dtype tables and conversion of stored tensors to fp32 (GGUF block formats as ggml defines them).
#include "engine/model/tensor.hpp"

#include <cassert>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "engine/core/error.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/random_weights.hpp"

namespace cbatch {

float f16_to_f32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);  // the same value; a signalling NaN comes back quiet
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exponent = 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3FF;
      bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
#endif
}

namespace {

float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// One ggml block of 32 elements: Q8_0 = f16 d, int8 q[32]; Q4_0 = f16 d, 16 bytes of nibbles (x - 8);
// Q4_1 = f16 d, f16 m, 16 bytes of nibbles (x * d + m). Low nibbles are elements 0..15.
void dequantize_block(DType dtype, const uint8_t* block, float* out) {
  const float d = f16_to_f32(load_u16(block));
  if (dtype == DType::kQ8_0) {
    const auto* q = reinterpret_cast<const int8_t*>(block + 2);
    for (int i = 0; i < 32; ++i) out[i] = q8_0_value(q[i], d);
    return;
  }
  const bool has_min = dtype == DType::kQ4_1;
  const float m = has_min ? f16_to_f32(load_u16(block + 2)) : 0.0f;
  const uint8_t* q = block + (has_min ? 4 : 2);
  for (int i = 0; i < 16; ++i) {
    const int lo = q[i] & 0x0F;
    const int hi = q[i] >> 4;
    if (has_min) {
      out[i] = q4_1_value(lo, d, m);
      out[i + 16] = q4_1_value(hi, d, m);
    } else {
      out[i] = q4_0_value(lo, d);
      out[i + 16] = q4_0_value(hi, d);
    }
  }
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kIQ4_XS: return "iq4_xs";
  }
  return "?";
}

int64_t dtype_block_elems(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL: return 32;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return 256;
    default: return 1;
  }
}

int64_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kQ8_0: return 34;
    case DType::kQ4_0: return 18;
    case DType::kQ4_1: return 20;
    case DType::kQ5_0: return 22;
    case DType::kQ5_1: return 24;
    case DType::kIQ4_NL: return 18;
    case DType::kQ2_K: return 84;
    case DType::kQ3_K: return 110;
    case DType::kQ4_K: return 144;
    case DType::kQ5_K: return 176;
    case DType::kQ6_K: return 210;
    case DType::kIQ4_XS: return 136;
  }
  return 0;
}

int64_t row_bytes(DType dtype, int64_t cols) {
  const int64_t per_block = dtype_block_elems(dtype);
  if (cols % per_block != 0) {
    throw Error("a row of " + std::to_string(cols) + " elements is not a whole number of " +
                std::string(dtype_name(dtype)) + " blocks");
  }
  return cols / per_block * dtype_block_bytes(dtype);
}

void tensor_rows_to_f32(const TensorView& tensor, int64_t row_begin, int64_t num_rows, float* out) {
  assert(row_begin >= 0 && row_begin + num_rows <= tensor.rows);
  const int64_t cols = tensor.cols;
  if (tensor.is_random) {
    const RandomInit& r = tensor.random;
    for (int64_t i = 0; i < num_rows * cols; ++i) {
      out[i] = random_element(r.seed, r.scale, r.offset, static_cast<uint64_t>(row_begin * cols + i));
    }
    return;
  }
  const int64_t stride = row_bytes(tensor.dtype, cols);
  const auto* base = static_cast<const uint8_t*>(tensor.data) + row_begin * stride;
  const int64_t n = num_rows * cols;
  switch (tensor.dtype) {
    case DType::kF32:
      std::memcpy(out, base, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(base + 2 * i));
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(base + 2 * i));
      return;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1: {
      const int64_t block_bytes = dtype_block_bytes(tensor.dtype);
      for (int64_t b = 0; b < n / 32; ++b) dequantize_block(tensor.dtype, base + b * block_bytes, out + 32 * b);
      return;
    }
    default: {
      const int64_t block_bytes = dtype_block_bytes(tensor.dtype), block_elems = dtype_block_elems(tensor.dtype);
      for (int64_t b = 0; b < n / block_elems; ++b) {
        dequantize_quant_block(tensor.dtype, base + b * block_bytes, out + block_elems * b);
      }
      return;
    }
  }
}

}  // namespace cbatch
