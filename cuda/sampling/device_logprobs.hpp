// The CUDA backend's answers to StepRequest::logprob_queries (split as engine/backend/logprob_split.hpp says):
// rows the step already has are reduced on the device from the step's logits and drawn ids; every other
// row gets its logits from `head` a chunk at a time into a buffer of at most 32 MB, each chunk reduced at
// once by logprob_rows. Only the k values of each query come back. The buffers grow as steps need and
// are kept.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/sampling/logprob_rows.hpp"
#include "engine/backend/backend.hpp"

namespace cbatch {

class DeviceLogprobs {
 public:
  // head(d_rows, n, d_logits): the (n, vocab) fp32 final logits of batch rows d_rows[0..n) (on the device).
  using Head = std::function<void(const int32_t* d_rows, int n, float* d_logits)>;

  // d_step_logits (num_logits, vocab) and d_token_ids (num_logits) of the step's sampling rows; max_rows:
  // the most rows head may be given. Fills out.logprobs; synchronizes the stream.
  void answer(const RaggedBatch& batch, int vocab, int max_rows, const float* d_step_logits,
              const int32_t* d_token_ids, const Head& head, cudaStream_t stream, const StepRequest& request,
              StepResult& out);

  // A copy of the step's logits (n floats), made before the device sampler changes them; valid until the
  // next call.
  const float* keep_raw(const float* d_logits, size_t n, cudaStream_t stream);

 private:
  void collect(const std::vector<size_t>& order, int width, cudaStream_t stream, StepResult& out) const;

  DeviceBuffer<float> raw_logits_;    // keep_raw's copy
  DeviceBuffer<float> chunk_logits_;  // (chunk rows, vocab)
  DeviceBuffer<int32_t> rows_;        // (queries) the computed queries' batch rows
  DeviceBuffer<device_logprobs::LogprobTask> tasks_;  // (queries) sampled ones first, then the computed
  DeviceBuffer<float> target_;        // (queries)
  DeviceBuffer<int32_t> ids_;         // (queries, width)
  DeviceBuffer<float> lps_;           // (queries, width)
};

}  // namespace cbatch
