// Batch-invariant fp32 matrix product for the CPU backend: Y (M, N) = X (M, K) * W^T for a Linear weight
// W (N, K). W is packed once, at load, into panels of kPanelWidth output columns laid out k-major, and the
// product is an outer-product (BLIS-style) kernel: every output element is one fused multiply-add chain
// over k in order, from zero, whatever M, the tile it lands in, or the thread that computes it. That is
// what makes greedy outputs bit-identical across batch sizes (a general BLAS changes its summation order
// with M), and it is exactly matmul_ref's order.
//
// A weight stored in a GGUF block type (every one cbatch reads: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K,
// IQ4_NL, IQ4_XS, MXFP4; and cbatch's own Q4_Z, Q8_Z, FP8 and NVFP4) stays in its blocks, regrouped by
// panel (cpu_matmul_blocks.hpp: per lane and 32 k, fp32 scales and offsets and the codes of a k's lanes side
// by side). The product decodes them to exactly the
// values tensor_rows_to_f32 gives: for one row in registers as each weight is used, for more rows a few
// panels at a time into a per-thread buffer that the fp32 kernel then runs on. Same bits as the fp32
// panels; 3-6x less memory to fill at load and to stream per step.
//
// Or, for --cpu-precision fast, the blocked panels are rewritten as int8 panels (cpu_matmul_int8.hpp) and
// the product quantizes each row of X to 8 bits on its own and sums integer products: not the fp32
// values, but still one fixed order per output element, so still batch-invariant.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/model/tensor.hpp"

namespace cbatch {

class ThreadPool;
namespace matmul_detail {
struct Q8Rows;
}

// Output columns per panel (the SIMD width this binary was built for: 16, or 8 without AVX-512).
int matmul_panel_width();

class PackedMatrix {
 public:
  // fill(row_begin, num_rows, out) writes rows [row_begin, row_begin + num_rows) of W (N, K) as fp32 to
  // out (num_rows, K). Rows are packed in parallel, one panel per task.
  using RowFiller = std::function<void(int64_t, int64_t, float*)>;
  // row_blocks(row): the consecutive GGUF blocks of one row of W (K / block elements of them).
  using BlockRows = std::function<const uint8_t*(int64_t)>;

  PackedMatrix() = default;
  PackedMatrix(int64_t n, int64_t k, const RowFiller& fill, ThreadPool& pool);
  // W kept in blocks of `dtype` (keeps_blocks(dtype, k) must hold), regrouped panel by panel in parallel;
  // int8: as int8 panels, for the 8-bit integer product; planes: a 5- or 6-bit type's panels hold its codes
  // in planes (cpu_matmul_int8.hpp), fewer bytes but more work a weight than whole bytes (for products of
  // a few rows, which stream the weights).
  PackedMatrix(int64_t n, int64_t k, DType dtype, const BlockRows& row_blocks, ThreadPool& pool, bool int8 = false,
               bool planes = false);

  // int8 matrices of different block types stacked by rows (a fused QKV of Q5_0, Q5_0 and Q8_0): each
  // part keeps its own panels; every part but the last a whole number of panels.
  explicit PackedMatrix(std::vector<PackedMatrix> parts);

  // An int8 matrix whose K columns are its inputs permuted (a pre-quantized act-order weight,
  // TensorView::input_order): column j holds input order[j], and the product gathers each activation row
  // so before quantizing it. Counted in bytes().
  void set_input_order(std::vector<int32_t> order);
  // The order, or nullptr (the inputs as they come); a stacked matrix's parts may each have one.
  const std::vector<int32_t>* input_order() const { return input_order_.empty() ? nullptr : &input_order_; }

  // Whether a (N, K) weight of this dtype can stay in its blocks: a block type, K a whole number of blocks.
  static bool keeps_blocks(DType dtype, int64_t k);

  int64_t rows() const { return n_; }   // N, output features
  int64_t cols() const { return k_; }   // K, input features
  bool is_blocked() const { return dtype_ != DType::kF32; }
  DType dtype() const { return dtype_; }
  bool is_int8() const { return int8_; }
  bool has_planes() const { return planes_; }  // int8 panels of a 5- or 6-bit type, in planes
  const std::vector<PackedMatrix>& parts() const { return parts_; }  // stacked parts, or none
  size_t bytes() const { return bytes_; }  // memory held
  // fp32 panels: the whole (ceil(N / width), K, width) array. Blocked: nullptr.
  const float* data() const { return is_blocked() ? nullptr : static_cast<const float*>(data_.get()); }
  // Panels [panel, panel + count) as fp32 into out (count, K, width), from the fp32 or blocked layout.
  void unpack_panels(int64_t panel, int count, float* out) const;
  // Blocked or int8: the bytes of one panel, and their size.
  const uint8_t* blocked_panel(int64_t panel) const {
    return static_cast<const uint8_t*>(data_.get()) + static_cast<size_t>(panel) * panel_bytes_;
  }
  size_t panel_bytes() const { return panel_bytes_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> data_;  // fp32: (ceil(N / width), K, width), zero-padded past N
  DType dtype_ = DType::kF32;
  bool int8_ = false;  // int8 panels (cpu_matmul_int8.hpp) instead of blocked ones
  bool planes_ = false;
  std::vector<PackedMatrix> parts_;  // stacked parts (then data_ is empty)
  std::vector<int32_t> input_order_;  // (K) or empty
  size_t bytes_ = 0;
  size_t panel_bytes_ = 0;  // blocked: bytes of one panel
  int64_t n_ = 0;
  int64_t k_ = 0;
};

void matmul(const float* x, const PackedMatrix& w, float* y, int64_t m, ThreadPool& pool);

// matmul's product on the calling thread alone, for a caller that splits many small products across the
// pool itself (the picked experts of a mixture of experts, cpu_moe_experts.hpp). An int8 matrix reads xq's
// rows [0, m) (x's rows quantized by quantize_rows_q8, cpu_matmul_int8.hpp) and not x; the others read
// x (m, K). The same bits as matmul.
void matmul_on_thread(const float* x, const matmul_detail::Q8Rows* xq, const PackedMatrix& w, float* y, int64_t m);

// The same function one element at a time: y[i][j] = fma chain over k of x[i][k] * w[j][k] (for tests).
void matmul_ref(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k);

}  // namespace cbatch
