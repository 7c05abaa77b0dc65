// Rotary position embedding on the CPU, in fp32 (cpu_rope.cpp). The backend computes each position's
// angles once per step (rope_angles from the layer's inverse frequencies) and rotates every q and k head
// of that row by them (rope_head). Also the reference the CUDA kernels are tested against.
#pragma once

#include "engine/model/model_config.hpp"

namespace cbatch {

// cos and sin (head_dim / 2 each) of the rotation at position pos; inv_freq: (head_dim / 2).
void rope_angles(int pos, const float* inv_freq, int head_dim, float* cos_out, float* sin_out);
// Rotates one head vector (head_dim) in place by the angles of rope_angles.
void rope_head(float* v, int head_dim, const float* cos, const float* sin, RopeLayout layout);

}  // namespace cbatch
