// A sampling row's allowed-token bitmask (structured outputs): bit t % 64 of word t / 64 set = token t
// may be drawn. The host masks a row's logits with apply_token_mask before its Sampler; the device
// sampler (cuda/sampling/sample_rows.cuh) applies the same words before penalties and the draw.
#pragma once
#include <math.h>

#include <cstdint>

#include "engine/base/host_device.hpp"

namespace cbatch {

// Words of a mask over `vocab` tokens.
CBATCH_HOST_DEVICE constexpr int token_mask_words(int vocab) { return (vocab + 63) / 64; }

CBATCH_HOST_DEVICE inline bool token_allowed(const uint64_t* words, int token) {
  return (words[token / 64] >> (token % 64)) & 1u;
}

// logits[t] = -inf for every token t < vocab whose bit is clear.
inline void apply_token_mask(float* logits, int vocab, const uint64_t* words) {
  for (int t0 = 0; t0 < vocab; t0 += 64) {
    if (words[t0 / 64] == ~uint64_t{0}) continue;
    for (int t = t0; t < vocab && t < t0 + 64; ++t) {
      if (!token_allowed(words, t)) logits[t] = -INFINITY;
    }
  }
}

}  // namespace cbatch
