// Host launcher of the chunked gated delta rule (deltanet_chunked.cu, block code deltanet_chunked_block.cuh):
// the delta rule of deltanet_delta_rule for the sequences a DeltaNetChunks list names (deltanet_chunk_plan.hpp
// cuts it), equal to the token-by-token kernel's up to rounding (it sums in another order; the token-by-token
// kernel alone gives the same bits however a prompt is split over steps).
#pragma once
#include <cuda_runtime.h>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch {

using deltanet_detail::DeltaNetChunks;
using deltanet_detail::DeltaNetChunkWork;
using deltanet_detail::DeltaNetSeqs;
using deltanet_detail::DeltaNetStates;

// core (rows, value_dim) = the delta rule's outputs on the rows of the listed sequences (num_chunked_seqs of
// them, num_chunks chunks); their states advance past their real rows. conv_out and gates as
// deltanet_gates leaves them; work (deltanet_shape.hpp) as wide as the step's rows.
void deltanet_chunked_delta_rule(float* d_core, const float* d_conv_out, const float* d_gates,
                                 const DeltaNetChunkWork& work, const DeltaNetSizes& dims, const DeltaNetSeqs& seqs,
                                 const DeltaNetChunks& chunks, int num_chunked_seqs, int num_chunks,
                                 const DeltaNetStates& states, cudaStream_t stream);

}  // namespace cbatch
