// The CPU backend's paged attention in fp32 (cache layout and parameters: cpu_attention_params.hpp). Each
// query row's result depends only on its own query and the keys it sees, in a fixed order, so it does not
// depend on batching; attend_row and attend_rows take the AVX-512 kernel (cpu_attention_avx512.cpp) where
// the CPU and head_dim allow, with the same bits. These are also the references the CUDA kernels are
// tested against.
#pragma once
#include <cmath>
#include <cstdint>

#include "engine/cpu/cpu_attention_params.hpp"

namespace cbatch {

// Attention's softmax numerators of `count` scores: s[i] = exp_fp32(s[i] - max); returns their sum, taken
// in kExpWeightLanes lanes (s[i] added to lane i % 16 in order), the lanes then added by halves (lane j +=
// lane j + 8, then + 4, + 2, + 1), so that it vectorizes with its bits fixed (attend_row's AVX-512 kernel
// computes the same, 16 at a time).
float exp_weights(float* s, int count, float max);

// Attention of one query head vector q (head_dim) over the keys it sees (AttentionParams) of a sequence
// whose blocks are block_table; reads kv head `kv_head`; `sink` is the head's sink logit (-inf: none, the
// same bits as without). scratch: (pos + 1) floats. out: (head_dim).
void attend_head(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int kv_head,
                 const AttentionParams& params, float* scratch, float* out, float sink = -INFINITY);

// All num_heads query heads of one row (q: num_heads * head_dim) at once: each cached position's K and
// V rows are read once for every head (kv head h / (num_heads / num_kv_heads)). Per head the arithmetic
// and its order are attend_head's, so out (num_heads * head_dim) is bit-identical to calling attend_head
// head by head. scratch: attend_row_scratch(num_heads, pos) floats.
void attend_row(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int num_heads,
                int num_kv_heads, const AttentionParams& params, float* scratch, float* out);

// attend_row of up to kMaxAttendRows rows of one sequence (one block table) at once: row t's query heads at
// q + t * q_stride and position pos[t], its out at out + t * out_stride, each bit-identical to attend_row's.
// The rows share each K and V row's reads (a prompt's rows of a chunk: the keys one reads are the next's).
// scratch: count * attend_row_scratch(num_heads, the largest pos) floats.
void attend_rows(const float* q, int64_t q_stride, const PagedKv& cache, const int32_t* block_table, const int* pos,
                 int count, int num_heads, int num_kv_heads, const AttentionParams& params, float* scratch, float* out,
                 int64_t out_stride);

}  // namespace cbatch
