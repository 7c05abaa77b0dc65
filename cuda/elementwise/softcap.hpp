// Host launchers of the final-logit transforms (softcap.cu): the softcap and the divisor.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace cbatch {

// values (n) fp32 become cap * tanh(values / cap) in place (Gemma 2's final_logit_softcapping, as the
// CPU's softcap_row); cap must be positive.
void softcap(float* d_values, size_t n, float cap, cudaStream_t stream);

// values (n) fp32 become values / divisor in place (Granite's logits_scaling, as the CPU divides); divisor
// must be positive.
void divide_logits(float* d_values, size_t n, float divisor, cudaStream_t stream);

}  // namespace cbatch
