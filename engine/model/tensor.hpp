// Weight tensors as the model files hold them: a dtype and a view of the bytes (usually inside a
// memory-mapped file), or a recipe for dummy random weights. Backends convert each tensor once at load
// (the CPU backend to fp32 panels, or to panels that keep a block type's blocks; the CUDA backend to its
// compute dtype), so a quantized file is never expanded in full beyond the final copy. Layout is
// row-major (rows, cols); a Linear weight is (out_features, in_features), a norm weight is (1, dim).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace cbatch {

// Plain types, then the GGUF block types as published: the 32-element ones, the K-quants (256), the
// non-linear 4-bit ones and MXFP4 (OCP microscaling FP4; their decoding: quant_blocks.hpp). cpu_matmul.cpp
// sizes a table indexed by DType from the last enumerator: a new one goes last and updates it.
enum class DType : uint8_t {
  kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_1,
  kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS, kMXFP4,
};

std::string_view dtype_name(DType dtype);
// Elements per quantization block (1 for plain types) and bytes per block.
int64_t dtype_block_elems(DType dtype);
int64_t dtype_block_bytes(DType dtype);
// Bytes of one row of `cols` elements; cols must be a multiple of the block size.
int64_t row_bytes(DType dtype, int64_t cols);

struct RandomInit {
  uint64_t seed = 0;     // per tensor: element i = random_weight(seed, i) * scale + offset
  float scale = 0.0f;
  float offset = 0.0f;
};

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  int64_t rows = 1;             // (rows, cols), row-major
  int64_t cols = 1;
  const void* data = nullptr;   // bytes of rows * row_bytes(dtype, cols); nullptr for random tensors
  // dummy weights: generated from `random`, never stored in a file; a block `dtype` asks a backend to keep
  // the generated values quantized in that block type (Q8_0), or, for kMXFP4, says that the tensor's
  // values are blocks generated as such (random_weights.hpp random_mxfp4_block)
  bool is_random = false;
  RandomInit random;

  int64_t numel() const { return rows * cols; }
  bool empty() const { return data == nullptr && !is_random; }
};

// Converts rows [row_begin, row_begin + num_rows) to fp32 into out (num_rows, cols).
void tensor_rows_to_f32(const TensorView& tensor, int64_t row_begin, int64_t num_rows, float* out);

float f16_to_f32(uint16_t h);  // exact

// bf16 (an fp32's upper 16 bits) to fp32, exactly.
inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// x rounded to bf16, to nearest even; a NaN stays a (quiet) NaN, infinities stay infinite.
inline uint16_t f32_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace cbatch
