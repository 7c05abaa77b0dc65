// Rotary position embedding on the CPU, in fp32: the angles of a position, and one head vector rotated by
// them, its pairs adjacent (2i, 2i + 1) or split in halves (i, i + head_dim / 2) as the model's RopeLayout
// says. A vector's rotation depends only on its position, so results do not depend on batching.
#include "engine/cpu/cpu_rope.hpp"

#include <cmath>

namespace cbatch {

void rope_angles(int pos, const float* inv_freq, int head_dim, float* cos_out, float* sin_out) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos_out[i] = std::cos(angle);
    sin_out[i] = std::sin(angle);
  }
}

void rope_head(float* v, int head_dim, const float* cos, const float* sin, RopeLayout layout) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cos[i];
    const float s = sin[i];
    const int ia = layout == RopeLayout::kAdjacentPairs ? 2 * i : i;
    const int ib = layout == RopeLayout::kAdjacentPairs ? 2 * i + 1 : i + half;
    const float a = v[ia];
    const float b = v[ib];
    v[ia] = a * c - b * s;
    v[ib] = a * s + b * c;
  }
}

}  // namespace cbatch
