// Host launcher of the final-logit softcap (softcap.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace cbatch {

// values (n) fp32 become cap * tanh(values / cap) in place (Gemma 2's final_logit_softcapping, as the
// CPU's softcap_row); cap must be positive.
void softcap(float* d_values, size_t n, float cap, cudaStream_t stream);

}  // namespace cbatch
