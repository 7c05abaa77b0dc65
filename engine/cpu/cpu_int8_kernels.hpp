// Internal to the int8 matmul: what its dispatcher (cpu_matmul_int8.cpp) and its kernels share, one entry
// point per instruction set (cpu_int8_scalar.cpp, cpu_int8_avx2.cpp, cpu_int8_avx512.cpp), each with
// matmul_int8_panels' contract and the same bits; each picks the format (with_int8_format) itself, so its
// templates stay in its file. The AVX ones exist on x86-64 only; the caller checks that the CPU runs them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/model/tensor.hpp"

namespace cbatch::matmul_detail {

struct Q8Rows;

// matmul_int8_panels (cpu_matmul_int8.hpp) less its instruction set; x quantized per q8_block(dtype).
void run_int8_panels_scalar(DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                            const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                            float* y, int64_t ldy, int64_t n);
#if defined(__x86_64__)
void run_int8_panels_avx2(DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                          const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                          float* y, int64_t ldy, int64_t n);
// Needs 16-lane panels (kLanes == 16: a build with AVX-512).
void run_int8_panels_avx512_vnni(DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                                 const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                                 float* y, int64_t ldy, int64_t n);

// quantize_rows_q8's block arithmetic with AVX-512 (cpu_matmul_int8.cpp's quantize_block and abs_max, the
// same bytes), n a multiple of 16.
void quantize_block_avx512(const float* xb, int n, float d, int8_t* q, int32_t* sums);
float abs_max_avx512(const float* x, int n);
#endif

}  // namespace cbatch::matmul_detail
