// A step's penalty tokens and token masks checked and copied to the device (sampling_lists.hpp).
#include "cuda/sampling/sampling_lists.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "engine/sample/token_mask.hpp"

namespace cbatch {
namespace {

// A step's list on the device (nullptr when empty), copied through its pinned staging buffer. The buffers
// grow to twice what a step needs, so that growing is rare (growing frees the old ones, which waits for
// the device).
template <typename V>
const V* upload_step_list(const std::vector<V>& values, DeviceBuffer<V>& device, PinnedBuffer<V>& staging,
                          cudaStream_t stream) {
  const size_t n = values.size();
  if (n == 0) return nullptr;
  if (n > device.size()) {
    device = DeviceBuffer<V>();
    staging = PinnedBuffer<V>();
    device = DeviceBuffer<V>(2 * n);
    staging = PinnedBuffer<V>(2 * n);
  }
  std::copy(values.begin(), values.end(), staging.get());
  CUDA_CHECK(cudaMemcpyAsync(device.get(), staging.get(), n * sizeof(V), cudaMemcpyHostToDevice, stream));
  return device.get();
}

}  // namespace

const PenaltyToken* SamplingLists::upload_penalty_tokens(const StepRequest& request, cudaStream_t stream) {
  const size_t n = request.penalty_tokens.size();
  for (const RowSampling& row : request.sampling) {
    if (row.penalty_begin < 0 || row.penalty_begin > row.penalty_end || static_cast<size_t>(row.penalty_end) > n) {
      throw Error("CUDA backend: penalty tokens [" + std::to_string(row.penalty_begin) + ", " +
                  std::to_string(row.penalty_end) + ") of a row outside the step's " + std::to_string(n));
    }
  }
  return upload_step_list(request.penalty_tokens, penalty_tokens_, host_penalty_tokens_, stream);
}

const uint64_t* SamplingLists::upload_token_mask(const StepRequest& request, int vocab_size, cudaStream_t stream) {
  const size_t n = request.token_mask.size();
  const size_t words = static_cast<size_t>(token_mask_words(vocab_size));
  for (const RowSampling& row : request.sampling) {
    if (row.mask_offset < -1 || (row.mask_offset >= 0 && static_cast<size_t>(row.mask_offset) + words > n)) {
      throw Error("CUDA backend: a row's token mask at word " + std::to_string(row.mask_offset) + " (" +
                  std::to_string(words) + " words) outside the step's " + std::to_string(n));
    }
  }
  return upload_step_list(request.token_mask, token_mask_, host_token_mask_, stream);
}

}  // namespace cbatch
