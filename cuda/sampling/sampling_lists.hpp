// A step's sampling lists on the device, for the device sampler (sample_rows.hpp): the penalized rows'
// tokens and the constrained rows' token masks of a StepRequest, each checked against the rows that read
// it and copied through a pinned staging buffer. The buffers grow as steps need and are kept.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/device_buffer.hpp"
#include "engine/backend/backend.hpp"
#include "engine/sample/radix_sampling.hpp"

namespace cbatch {

class SamplingLists {
 public:
  // The step's penalty tokens on the device (nullptr when there are none), after checking that every row's
  // range lies inside them.
  const PenaltyToken* upload_penalty_tokens(const StepRequest& request, cudaStream_t stream);
  // The step's constraint masks on the device (one copy; nullptr when no row has one), after checking
  // that every masked row's words (token_mask_words(vocab_size) of them) lie inside them.
  const uint64_t* upload_token_mask(const StepRequest& request, int vocab_size, cudaStream_t stream);

 private:
  DeviceBuffer<PenaltyToken> penalty_tokens_;       // (capacity) a step's penalized rows' tokens, grown on demand
  PinnedBuffer<PenaltyToken> host_penalty_tokens_;  // (capacity) their staging copy
  DeviceBuffer<uint64_t> token_mask_;                // (capacity) a step's constrained rows' masks, grown on demand
  PinnedBuffer<uint64_t> host_token_mask_;           // (capacity) their staging copy
};

}  // namespace cbatch
