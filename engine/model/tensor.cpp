// dtype tables and conversion of stored tensors to fp32 (GGUF block formats as ggml defines them).
#include "engine/model/tensor.hpp"

#include <cassert>
#include <cstring>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/random_weights.hpp"

namespace cbatch {


namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace


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
  if (tensor.input_order != nullptr) {  // decoded as stored, then each column put back at its input
    TensorView stored = tensor;
    stored.input_order = nullptr;
    std::vector<float> columns(static_cast<size_t>(num_rows * tensor.cols));
    tensor_rows_to_f32(stored, row_begin, num_rows, columns.data());
    for (int64_t r = 0; r < num_rows; ++r) {
      const float* row = columns.data() + r * tensor.cols;
      for (int64_t j = 0; j < tensor.cols; ++j) out[r * tensor.cols + tensor.input_order[j]] = row[j];
    }
    return;
  }
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
