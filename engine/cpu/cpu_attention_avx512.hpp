// Internal to cpu_attention.cpp: attend_row's and attend_rows' AVX-512 kernel (chosen at run time), for
// head_dim a multiple of 64. Its arithmetic is attend_head's, bit for bit: each score score_positions' chains
// of attention_mul_add per 8-lane slice of k in order, reduced by its fixed tree; each weight exp_fp32 of
// the score less the head's max, their sum exp_weights' (16 lanes, then halves), both 16 at a time; each
// output element one attention_mul_add chain of weight * v over the positions in order, from zero.
// attend_head spells out its multiply-adds, so this holds whatever the compiler and its contraction setting.
// test_cpu_backend checks the bits against attend_head.
#pragma once
#include <cstdint>

#include "engine/cpu/cpu_attention_params.hpp"

namespace cbatch::attention_detail {

constexpr int kHeadDimMultiple = 64;  // weighted_values' 64 output elements at a time

// Whether this CPU and head_dim can run attend_rows_avx512.
bool can_attend_row_avx512(int head_dim);

// attend_rows' contract (cpu_attention.hpp), same scratch; count 1 is attend_row. Caller checks
// can_attend_row_avx512 first.
void attend_rows_avx512(const float* q, int64_t q_stride, const PagedKv& cache, const int32_t* block_table,
                        const int* pos, int count, int num_heads, int num_kv_heads, const AttentionParams& params,
                        float* scratch, float* out, int64_t out_stride);

}  // namespace cbatch::attention_detail
