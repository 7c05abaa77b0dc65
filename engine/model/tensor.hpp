// Weight tensors as the model files hold them: a dtype and a view of the bytes (usually inside a
// memory-mapped file), or a recipe for dummy random weights. Backends convert each tensor once at load
// (the CPU backend to fp32 panels, or to panels that keep a block type's blocks; the CUDA backend to its
// compute dtype), so a quantized file is never expanded in full beyond the final copy. Layout is
// row-major (rows, cols); a Linear weight is (out_features, in_features), a norm weight is (1, dim).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/model/dtype.hpp"

namespace cbatch {

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
  // (cols) or nullptr: the stored columns are the inputs permuted, column j holding input input_order[j]
  // (a pre-quantized act-order weight whose groups were made contiguous: int_codes.hpp). Kept with the
  // bytes; tensor_rows_to_f32 undoes it, a consumer of the raw blocks must permute its inputs alike.
  const int32_t* input_order = nullptr;
  // dummy weights: generated from `random`, never stored in a file; a block `dtype` asks a backend to keep
  // the generated values quantized in that block type (Q8_0), or, for kMXFP4, says that the tensor's
  // values are blocks generated as such (random_weights.hpp random_mxfp4_block)
  bool is_random = false;
  RandomInit random;
  // The buffer behind `data` when the loader made it (a pre-quantized checkpoint's blocks, rearranged
  // experts), else nullptr (a view into a mapped file, which Model::storage keeps). Every copy of the view
  // keeps the bytes alive, so they are freed with the last view and never before (take_tensors, model.hpp).
  std::shared_ptr<const void> owner;

  int64_t numel() const { return rows * cols; }
  bool empty() const { return data == nullptr && !is_random; }
};

// Converts rows [row_begin, row_begin + num_rows) to fp32 into out (num_rows, cols), in the inputs' order
// (an input_order undone).
void tensor_rows_to_f32(const TensorView& tensor, int64_t row_begin, int64_t num_rows, float* out);

}  // namespace cbatch
