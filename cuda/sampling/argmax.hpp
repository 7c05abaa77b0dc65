// Host launcher of the greedy-sampling argmax (argmax.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cbatch {

// out[r] = the index of the largest logits[r, :] over vocab entries; ties go to the lowest index and
// NaN entries never win (a row of NaN gives 0). logits (num_rows, vocab) fp32, out (num_rows) int32.
void argmax(int32_t* d_out, const float* d_logits, int num_rows, int vocab, cudaStream_t stream);

}  // namespace cbatch
