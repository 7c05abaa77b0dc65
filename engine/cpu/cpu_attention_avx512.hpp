// Internal to cpu_ops.cpp: attend_row's AVX-512 kernel (chosen at run time), for head_dim a multiple of 128.
// Its arithmetic is attend_head's as compiled, bit for bit: each score a product-then-add chain per 8-lane
// slice of k in order (no fused multiply-add: the compiler vectorizes dot_fixed_order that way when head_dim
// is whole 128-element steps; shorter heads run its scalar remainder, fused, hence the limit), reduced by
// the same fixed tree; each output element one fused multiply-add chain of weight * v over the positions in
// order, from zero. That is how GCC compiles attend_head; clang contracts the scores' products too, so
// clang builds never choose this kernel. test_cpu_backend checks the bits against attend_head.
#pragma once
#include <cstdint>

#include "engine/cpu/cpu_ops.hpp"

namespace cbatch::attention_detail {

constexpr int kHeadDimMultiple = 128;

// Whether this CPU and head_dim can run attend_row_avx512.
bool can_attend_row_avx512(int head_dim);

// attend_row's contract (cpu_ops.hpp), same scratch. Caller checks can_attend_row_avx512 first.
void attend_row_avx512(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int num_heads,
                       int num_kv_heads, const AttentionParams& params, float* scratch, float* out);

}  // namespace cbatch::attention_detail
