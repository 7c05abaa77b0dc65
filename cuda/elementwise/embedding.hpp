// Host launcher of the embedding gather (embedding.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cbatch {

// x (num_tokens, dim) fp32 = table[tokens[r]] * scale for every row r (widened to fp32, then multiplied
// in fp32: the family's embedding_scale, Gemma's sqrt(dim); 1 for Llama); table (vocab, dim) in T.
// Token ids must lie in [0, vocab): the caller validates them on the host.
template <typename T>
void embedding(float* d_x, const T* d_table, const int32_t* d_tokens, int num_tokens, int dim, cudaStream_t stream,
               float scale = 1.0f);

}  // namespace cbatch
