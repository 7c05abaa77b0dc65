// The tasks and outputs of the device log-softmax and top-k (logprob_rows.hpp), apart from any CUDA
// header so that the block code's host tests can include them.
#pragma once
#include <cstdint>

namespace cbatch {
namespace device_logprobs {

// One query as the device sees it: a row of the logits buffer, k, and the token whose log-probability
// is wanted (-1: the row's id in token_ids).
struct LogprobTask {
  int32_t logits_row = 0;
  int32_t k = 0;
  int32_t target = -1;
};

// Device arrays the tasks' answers go to, task by task.
struct LogprobOutputs {
  float* target_logprob = nullptr;  // (tasks)
  int32_t* top_ids = nullptr;       // (tasks, width) most likely first, ties to the lower id, -1 past k
  float* top_logprobs = nullptr;    // (tasks, width)
  int width = 0;                    // >= every task's k
};

}  // namespace device_logprobs

}  // namespace cbatch
