// Host launcher of the device log-softmax and top-k (logprob_rows.cu; block code in logprob_rows.cuh):
// each task's logits row reduced on the GPU to its target's log-probability and its k most likely tokens,
// so a step copies back k values a row and never the rows themselves.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/sampling/logprob_tasks.hpp"

namespace cbatch {

// Task t (of num_tasks, on the device) reduces row tasks[t].logits_row of logits (rows, vocab) fp32;
// token_ids (on the device) serves tasks with target -1 and may be null when there are none.
void logprob_rows(const float* d_logits, const int32_t* d_token_ids, const device_logprobs::LogprobTask* d_tasks,
                  int num_tasks, int vocab, const device_logprobs::LogprobOutputs& d_out, cudaStream_t stream);

}  // namespace cbatch
