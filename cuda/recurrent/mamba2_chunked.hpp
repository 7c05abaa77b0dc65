// Host launcher of the chunked Mamba-2 scan (mamba2_chunked.cu, the state space duality form): the same
// outputs and states as mamba2_scan (mamba2.hpp) up to rounding, for the sequences of a step with at least
// kMambaChunkRows rows (deltanet_shape.hpp); mamba2_scan with chunked_from = kMambaChunkRows takes the others.
// No workspace: both kernels recompute each chunk's dt and cumulative decays from proj.
#pragma once
#include <cuda_runtime.h>

#include "cuda/recurrent/deltanet_shape.hpp"
#include "engine/model/recurrent_sizes.hpp"

namespace cbatch {

// y (rows, inner) fp32 and the slots' states of the sequences with at least kMambaChunkRows rows, from xbc
// (rows, conv_dim) and proj's dt (as mamba2_scan); max_seq_rows is the most rows a sequence has in the step.
template <typename T>
void mamba2_chunked_scan(float* d_y, const float* d_xbc, const T* d_proj, const float* d_decay, const float* d_dt_bias,
                         const float* d_skip, const Mamba2Sizes& dims, const deltanet_detail::DeltaNetSeqs& seqs,
                         int num_seqs, int max_seq_rows, const deltanet_detail::DeltaNetStates& states,
                         cudaStream_t stream);

}  // namespace cbatch
