// Host launcher of the SwiGLU activation (swiglu.cu).
#pragma once
#include <cuda_runtime.h>

namespace cbatch {

// out[r, c] = silu(gate_up[r, c]) * gate_up[r, hidden + c] with silu(a) = a / (1 + exp(-a)), in fp32.
// gate_up (num_rows, 2 * hidden) T: the fused [w_gate; w_up] GEMM output; out (num_rows, hidden) T.
template <typename T>
void swiglu(T* d_out, const T* d_gate_up, int num_rows, int hidden, cudaStream_t stream);

}  // namespace cbatch
