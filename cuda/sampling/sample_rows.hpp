// Host launcher of the device sampler (sample_rows.cu): one next token per logits row, drawn on the GPU
// with the Sampler's semantics, so a sampled step copies back its ids and not its logits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/sample/radix_sampling.hpp"

namespace cbatch {

// out[r] = the token row r draws under params[r] (radix_sampling::sample_row) after its constraint mask
// (token_mask_words(vocab) words of token_mask from params[r].mask_offset, if >= 0: -inf where a bit is
// clear) and then its penalties (params[r].penalty_begin..end of penalty_tokens), both applied to the
// logits in place: the argmax for greedy rows, else temperature, top-k, top-p, min-p and one draw at
// params[r].uniform. NaN logits are never drawn. logits (num_rows, vocab) fp32, params (num_rows),
// penalty_tokens, token_mask and out (num_rows) on the device.
void sample_rows(int32_t* d_out, float* d_logits, const RowSampling* d_params, const PenaltyToken* d_penalty_tokens,
                 const uint64_t* d_token_mask, int num_rows, int vocab, cudaStream_t stream);

}  // namespace cbatch
