// Host launcher of the gated FFN activation (swiglu.cu): SwiGLU, or GeGLU for the families that use it.
#pragma once
#include <cuda_runtime.h>

#include "engine/model/model_config.hpp"

namespace cbatch {

// out[r, c] = act(gate_up[r, c]) * gate_up[r, hidden + c] in fp32, act the family's activation: silu(a) =
// a / (1 + exp(-a)) (SwiGLU), or the tanh approximation of GELU (GeGLU: gelu_tanh of engine/cpu/cpu_ops).
// gate_up (num_rows, 2 * hidden) T: the fused [w_gate; w_up] GEMM output; out (num_rows, hidden) T.
template <typename T>
void swiglu(T* d_out, const T* d_gate_up, int num_rows, int hidden, cudaStream_t stream,
            Activation activation = Activation::kSilu);

}  // namespace cbatch
