// Model tensors into the CPU backend's kept forms (cpu_pack.hpp).
#include "engine/cpu/cpu_pack.hpp"

#include <algorithm>

#include "engine/base/error.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_matmul_int8.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/random_weights.hpp"

namespace cbatch {
namespace {

// Tensors kept in a block type they are not stored in, `dtype`: random (dummy) ones (Q8_0 rows generated in
// fp32 and quantized, MXFP4 rows generated as their blocks: random_weights.hpp), and on the 8-bit path an
// FP8 checkpoint's blocks decoded and re-quantized to Q8_0 (the int8 products take integer codes, which
// E4M3 values are not; Q8_0's step, a 32-block's largest magnitude / 127, is finer than E4M3's 3 mantissa
// bits for the block's larger weights). Then packed.
PackedMatrix pack_as_blocks(const std::vector<const TensorView*>& tensors, int64_t rows, int64_t cols, ThreadPool& pool,
                            bool int8, DType dtype) {
  if (dtype != DType::kQ8_0 && dtype != DType::kMXFP4) {
    throw Error("internal error: weights cannot be kept as " + std::string(dtype_name(dtype)) + " blocks");
  }
  const int64_t stride = row_bytes(dtype, cols);
  std::vector<uint8_t> blocks(static_cast<size_t>(rows * stride));  // (rows, cols / 32) blocks
  pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      int64_t first = 0;
      const TensorView* t = tensors.front();
      for (const TensorView* part : tensors) {
        if (r < first + part->rows) { t = part; break; }
        first += part->rows;
      }
      uint8_t* out = &blocks[static_cast<size_t>(r * stride)];
      if (dtype == DType::kMXFP4) {
        const int64_t row_blocks = cols / 32;
        random_mxfp4_blocks(t->random.seed, t->random.scale, static_cast<uint64_t>((r - first) * row_blocks),
                            row_blocks, out);
        continue;
      }
      tensor_rows_to_f32(*t, r - first, 1, row.data());
      quantize_q8_0(row.data(), cols, out);
    }
  }, 1, std::max<int64_t>(2, (1 << 16) / std::max<int64_t>(cols, 1)));
  return PackedMatrix(rows, cols, dtype, [&](int64_t r) { return &blocks[static_cast<size_t>(r * stride)]; }, pool,
                      int8);
}

// Parts of different block types (Gemma 3's Q5_0 Q and K with a Q8_0 V) can still be int8 panels, one
// matrix per part, when each part but the last fills whole panels and all take the same activation block.
bool can_stack_int8(const std::vector<const TensorView*>& tensors, Packing packing) {
  if (!packing.int8 || !packing.keep_blocks || tensors.size() < 2) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView* t = tensors[i];
    if (t->is_random || !PackedMatrix::keeps_blocks(t->dtype, t->cols) || t->cols != tensors.front()->cols) return false;
    if (matmul_detail::q8_block(t->dtype) != matmul_detail::q8_block(tensors.front()->dtype)) return false;
    if (i + 1 < tensors.size() && t->rows % matmul_panel_width() != 0) return false;
  }
  return true;
}

// Tensors with an input order (pre-quantized act-order weights, int_codes.hpp) as int8 panels, each part
// its own matrix with its own order; possible when can_stack_int8 would allow it (one part: always, given
// blocks). Else they are expanded to fp32 (tensor_rows_to_f32 puts the inputs back in their order).
bool can_keep_ordered(const std::vector<const TensorView*>& tensors, Packing packing) {
  if (!packing.int8 || !packing.keep_blocks) return false;
  if (tensors.size() > 1) return can_stack_int8(tensors, packing);
  const TensorView* t = tensors.front();
  return !t->is_random && PackedMatrix::keeps_blocks(t->dtype, t->cols);
}

}  // namespace

// Rows of several tensors stacked (rows summed, cols shared) and packed for matmul, converted panel by
// panel across the pool (the packed layout is the only copy made). When every part is stored in the same
// block type the matrix keeps its blocks (packing.keep_blocks), else it is expanded to fp32.
PackedMatrix pack_stacked(const std::vector<const TensorView*>& tensors, ThreadPool& pool, Packing packing) {
  bool ordered = false;
  for (const TensorView* t : tensors) ordered = ordered || t->input_order != nullptr;
  if (ordered && can_keep_ordered(tensors, packing)) {
    std::vector<PackedMatrix> parts;
    for (const TensorView* t : tensors) {
      TensorView stored = *t;
      stored.input_order = nullptr;
      parts.push_back(pack_stacked({&stored}, pool, packing));
      if (t->input_order != nullptr) parts.back().set_input_order({t->input_order, t->input_order + t->cols});
    }
    return parts.size() == 1 ? std::move(parts.front()) : PackedMatrix(std::move(parts));
  }
  bool keep_blocks = packing.keep_blocks && !ordered;
  int64_t rows = 0;
  for (const TensorView* t : tensors) rows += t->rows;
  const int64_t cols = tensors.front()->cols;
  const DType dtype = tensors.front()->dtype;
  keep_blocks = keep_blocks && PackedMatrix::keeps_blocks(dtype, cols);
  bool all_random = true;
  for (const TensorView* t : tensors) {
    keep_blocks = keep_blocks && t->dtype == dtype;
    all_random = all_random && t->is_random;
  }
  if (keep_blocks && all_random) return pack_as_blocks(tensors, rows, cols, pool, packing.int8, dtype);
  bool all_fp8 = packing.int8 && packing.keep_blocks && !ordered && cols % 32 == 0;
  for (const TensorView* t : tensors) all_fp8 = all_fp8 && t->dtype == DType::kFP8 && !t->is_random;
  if (all_fp8) return pack_as_blocks(tensors, rows, cols, pool, true, DType::kQ8_0);
  if (!keep_blocks && can_stack_int8(tensors, packing)) {
    std::vector<PackedMatrix> stacked;
    for (const TensorView* t : tensors) stacked.push_back(pack_stacked({t}, pool, packing));
    return PackedMatrix(std::move(stacked));
  }
  for (const TensorView* t : tensors) keep_blocks = keep_blocks && !t->is_random;
  if (keep_blocks) {
    auto row_blocks = [&](int64_t row) {
      int64_t first = 0;
      for (const TensorView* t : tensors) {
        if (row < first + t->rows) return static_cast<const uint8_t*>(t->data) + (row - first) * row_bytes(dtype, cols);
        first += t->rows;
      }
      throw Error("internal error: row " + std::to_string(row) + " past the stacked tensors");
    };
    return PackedMatrix(rows, cols, dtype, row_blocks, pool, packing.int8, packing.planes);
  }
  auto fill = [&](int64_t row, int64_t count, float* out) {
    int64_t first = 0;  // global row of the current tensor's row 0
    for (const TensorView* t : tensors) {
      const int64_t begin = std::max(row, first), end = std::min(row + count, first + t->rows);
      if (begin < end) tensor_rows_to_f32(*t, begin - first, end - begin, out + (begin - row) * cols);
      first += t->rows;
    }
  };
  return PackedMatrix(rows, cols, fill, pool);
}

std::vector<float> stack_values(const std::vector<const TensorView*>& parts) {
  std::vector<float> values;
  for (const TensorView* t : parts) {
    const size_t at = values.size();
    values.resize(at + static_cast<size_t>(t->numel()));
    tensor_rows_to_f32(*t, 0, t->rows, values.data() + at);
  }
  return values;
}

}  // namespace cbatch
