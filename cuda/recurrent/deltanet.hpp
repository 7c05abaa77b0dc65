// Host launchers of the gated DeltaNet layer's steps between its products (deltanet.cu): a layer is
//   proj = h [q|k|v | z] and ba = h [b | a] (GEMMs), deltanet_conv, deltanet_gates, deltanet_delta_rule,
//   deltanet_gated_norm, then the output GEMM of its result,
// with each sequence's conv window and recurrent matrices in its state slot (DeltaNetStates). The formulas
// are those of the CPU's cpu_deltanet.cpp, in the same order per value.
#pragma once
#include <cuda_runtime.h>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch {

using deltanet_detail::DeltaNetSeqs;
using deltanet_detail::DeltaNetStates;

// conv_out (rows, conv_dim) = silu(causal conv of proj's q|k|v channels over each sequence's window and
// rows); the windows advance past the real rows. proj (rows, proj_dim) T, taps (conv_dim, conv_kernel).
template <typename T>
void deltanet_conv(float* d_conv_out, const T* d_proj, const float* d_taps, const DeltaNetSizes& dims,
                   const DeltaNetSeqs& seqs, int num_seqs, const DeltaNetStates& states, cudaStream_t stream);

// q and k of conv_out L2-normed in place (q scaled by k_head_dim^-1/2); gates (rows, 2 num_v_heads) = beta
// and the decay factor per value head from ba (rows, [b | a]) T, decay A (num_v_heads) and dt_bias.
template <typename T>
void deltanet_gates(float* d_conv_out, float* d_gates, const T* d_ba, const float* d_decay, const float* d_dt_bias,
                    const DeltaNetSizes& dims, int num_rows, cudaStream_t stream);

// core (rows, value_dim) = the delta rule's outputs, token by token per sequence and value head; the
// states advance past the real rows.
void deltanet_delta_rule(float* d_core, const float* d_conv_out, const float* d_gates, const DeltaNetSizes& dims,
                         const DeltaNetSeqs& seqs, int num_seqs, const DeltaNetStates& states, cudaStream_t stream);

// out (rows, value_dim) T = RMSNorm(core per value head) weight silu(z), z the last value_dim of proj.
template <typename T>
void deltanet_gated_norm(T* d_out, const float* d_core, const T* d_proj, const float* d_weight,
                         const DeltaNetSizes& dims, int num_rows, float eps, cudaStream_t stream);

// A (n) = -exp(A_log) in place: the decay as Hugging Face files store it (ModelConfig::decay_from_log), turned
// into the A the gates read, as the CPU's weights do at load.
void deltanet_decay_from_log(float* d_decay, int n, cudaStream_t stream);

}  // namespace cbatch
