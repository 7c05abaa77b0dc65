// dtype tables and conversion of stored tensors to fp32 (GGUF block formats as ggml defines them).
#include "engine/model/tensor.hpp"

#include <cassert>
#include <cstring>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "engine/base/error.hpp"
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

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
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
    case DType::kMXFP4: return "mxfp4";
  }
  return "?";
}

int64_t dtype_block_elems(DType dtype) {
  if (!is_block_type(dtype)) return 1;
  return with_block_format(dtype, [](auto format) { return decltype(format)::kElems; });
}

int64_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    default: return with_block_format(dtype, [](auto format) { return decltype(format)::kBytes; });
  }
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
  if (tensor.is_random && tensor.dtype == DType::kMXFP4) {  // generated as blocks: their decoded values
    const RandomInit& r = tensor.random;
    const int64_t num_blocks = num_rows * cols / 32;
    std::vector<uint8_t> blocks(static_cast<size_t>(num_blocks * 17));
    random_mxfp4_blocks(r.seed, r.scale, static_cast<uint64_t>(row_begin * cols / 32), num_blocks, blocks.data());
    dequantize_blocks(DType::kMXFP4, blocks.data(), num_blocks, out);
    return;
  }
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
    default:
      dequantize_blocks(tensor.dtype, base, n / dtype_block_elems(tensor.dtype), out);
      return;
  }
}

}  // namespace cbatch
