// Host launchers of a Mamba-2 layer's steps between its products (mamba2.cu; Granite 4.0-H, Nemotron-H):
//   proj = h [z | x|B|C | dt] (a GEMM), mamba2_conv, mamba2_scan, mamba2_gated_norm, then the output GEMM,
// with each sequence's conv window ((conv_kernel - 1, conv_dim) fp32) and per-head states ((heads, head_dim,
// state_size) fp32) in its state slot. The formulas are those of the CPU's cpu_mamba2.cpp, in the same order
// per value.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/recurrent/deltanet_shape.hpp"
#include "engine/model/recurrent_sizes.hpp"

namespace cbatch {

// xbc (rows, conv_dim) fp32 = silu(causal conv of proj's x|B|C channels + bias) over each sequence's window
// and rows; the windows advance past the real rows. proj (rows, in_proj_dim) T, taps (conv_dim, conv_kernel).
template <typename T>
void mamba2_conv(float* d_xbc, const T* d_proj, const float* d_taps, const float* d_bias, const Mamba2Sizes& dims,
                 const deltanet_detail::DeltaNetSeqs& seqs, int num_seqs, const deltanet_detail::DeltaNetStates& states,
                 cudaStream_t stream);

// y (rows, inner) fp32 = the selective scan's outputs (D skip included), token by token per sequence and head,
// dt from proj's last num_heads values; the states advance past the real rows. decay A (heads), negative.
// Sequences of at least chunked_from rows are skipped (left to mamba2_chunked_scan, mamba2_chunked.hpp).
template <typename T>
void mamba2_scan(float* d_y, const float* d_xbc, const T* d_proj, const float* d_decay, const float* d_dt_bias,
                 const float* d_skip, const Mamba2Sizes& dims, const deltanet_detail::DeltaNetSeqs& seqs, int num_seqs,
                 const deltanet_detail::DeltaNetStates& states, cudaStream_t stream, int chunked_from = INT32_MAX);

// out (rows, inner) T = RMSNorm(y silu(z)) weight per group of inner / num_groups values, z proj's first inner.
template <typename T>
void mamba2_gated_norm(T* d_out, const float* d_y, const T* d_proj, const float* d_weight, const Mamba2Sizes& dims,
                       int num_rows, float eps, cudaStream_t stream);

}  // namespace cbatch
