// Host launcher of the embedding gather (embedding.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cbatch {

// x (num_tokens, dim) fp32 = table[tokens[r]] for every row r; table (vocab, dim) in T.
// Token ids must lie in [0, vocab): the caller validates them on the host.
template <typename T>
void embedding(float* d_x, const T* d_table, const int32_t* d_tokens, int num_tokens, int dim,
               cudaStream_t stream);

}  // namespace cbatch
