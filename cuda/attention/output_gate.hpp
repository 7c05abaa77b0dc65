// The attention output gate (Qwen3.5's gated attention, output_gate.cu): the q projection's rows hold per
// head [q (head_dim) | gate (head_dim)]; the attention's output is multiplied by sigmoid(gate) before the
// output projection, as the CPU's split_output_gate and apply_output_gate do.
#pragma once
#include <cuda_runtime.h>

namespace cbatch {

// From gated (rows, 2 q_dim + 2 kv_dim), the projection with each q head followed by its gate: qkv (rows,
// q_dim + 2 kv_dim) with the q heads closed up and k, v as they are, and gate (rows, q_dim).
template <typename T>
void split_output_gate(T* d_qkv, T* d_gate, const T* d_gated, int num_rows, int num_heads, int head_dim, int kv_dim,
                       cudaStream_t stream);

// attn (rows, q_dim) *= sigmoid(gate), in fp32, rounded once.
template <typename T>
void apply_output_gate(T* d_attn, const T* d_gate, int num_rows, int q_dim, cudaStream_t stream);

}  // namespace cbatch
