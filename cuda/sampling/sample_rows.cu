// Host launcher of the device sampler: one block per logits row (the block code, and how it works, are in
// sample_rows.cuh).
#include "cuda/sampling/sample_rows.hpp"

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/sampling/sample_rows.cuh"

namespace cbatch {
namespace device_sampling {

__global__ void __launch_bounds__(kSampleThreads)
    sample_rows_kernel(int32_t* __restrict__ out, float* logits, const RowSampling* __restrict__ params,
                       const PenaltyToken* __restrict__ penalty_tokens, const uint64_t* __restrict__ token_mask,
                       int vocab) {
  // logits written and read: not __restrict__
  sample_block_row(out, logits, params, penalty_tokens, token_mask, vocab);
}

}  // namespace device_sampling

void sample_rows(int32_t* d_out, float* d_logits, const RowSampling* d_params, const PenaltyToken* d_penalty_tokens,
                 const uint64_t* d_token_mask, int num_rows, int vocab, cudaStream_t stream) {
  if (num_rows < 0 || vocab <= 0) {
    throw Error("sample_rows: bad sizes num_rows=" + std::to_string(num_rows) + " vocab=" + std::to_string(vocab));
  }
  if (num_rows == 0) return;
  using device_sampling::kSampleThreads;
  device_sampling::sample_rows_kernel<<<num_rows, kSampleThreads, 0, stream>>>(d_out, d_logits, d_params,
                                                                            d_penalty_tokens, d_token_mask, vocab);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cbatch
