// Host launcher of the device log-softmax and top-k: one block per task (the block code, and how it
// works, are in logprob_rows.cuh).
#include "cuda/sampling/logprob_rows.hpp"

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/sampling/logprob_rows.cuh"

namespace cbatch {
namespace device_logprobs {

__global__ void __launch_bounds__(kLogprobThreads)
    logprob_rows_kernel(const float* __restrict__ logits, const int32_t* __restrict__ token_ids,
                        const LogprobTask* __restrict__ tasks, int vocab, LogprobOutputs out) {
  __shared__ LogprobShared shared;
  logprob_block_row(logits, token_ids, tasks, vocab, out, shared);
}

}  // namespace device_logprobs

void logprob_rows(const float* d_logits, const int32_t* d_token_ids, const device_logprobs::LogprobTask* d_tasks,
                  int num_tasks, int vocab, const device_logprobs::LogprobOutputs& d_out, cudaStream_t stream) {
  if (num_tasks < 0 || vocab <= 0 || d_out.width < 0) {
    throw Error("logprob_rows: bad sizes num_tasks=" + std::to_string(num_tasks) + " vocab=" + std::to_string(vocab) +
                " width=" + std::to_string(d_out.width));
  }
  if (num_tasks == 0) return;
  using device_logprobs::kLogprobThreads;
  device_logprobs::logprob_rows_kernel<<<num_tasks, kLogprobThreads, 0, stream>>>(d_logits, d_token_ids, d_tasks, vocab,
                                                                                 d_out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cbatch
