// The block code of a Mamba-2 layer's steps between its products (mamba2.cu; Granite 4.0-H, Nemotron-H): the
// conv with its bias and SiLU over the x|B|C channels (causal_conv_block.cuh), the selective scan per
// (sequence, head) token by token, and the gated grouped RMSNorm. The formulas and each value's order of
// operations are those of the CPU's cpu_mamba2.cpp, so a prompt prefilled in chunks leaves the same state,
// bit for bit, as one prefilled whole. Include it as causal_conv_block.cuh says.
#pragma once
#include <cstdint>

#include "cuda/recurrent/causal_conv_block.cuh"
#include "engine/model/recurrent_sizes.hpp"

namespace cbatch::recurrent_detail {

constexpr int kMambaNormThreads = 32;  // a warp per (row, group)

// A conv channel's input: x|B|C of the in projection's row r.
template <typename T>
struct Mamba2ConvInput {
  const T* proj;  // (rows, in_proj_dim)
  Mamba2Sizes d;
  __device__ float operator()(int64_t r, int c) const { return to_float(proj[r * d.in_proj_dim() + d.inner() + c]); }
};

// Its output, fp32: what the scan reads.
struct Mamba2ConvOutput {
  float* xbc;  // (rows, conv_dim)
  int conv_dim;
  __device__ void operator()(int64_t r, int c, float v) const { xbc[r * conv_dim + c] = v; }
};

// Block (sequence blockIdx.x, channels from blockIdx.y * blockDim.x): xbc = silu(conv(x|B|C) + bias).
template <typename T>
__device__ __forceinline__ void mamba2_conv_block(float* __restrict__ xbc, const T* __restrict__ proj,
                                                  const float* __restrict__ taps,  // (conv_dim, conv_kernel)
                                                  const float* __restrict__ bias,  // (conv_dim)
                                                  const Mamba2Sizes& d, const RecurrentSeqs& seqs,
                                                  const RecurrentStates& states) {
  ConvParams p;
  p.taps = taps;
  p.bias = bias;
  p.channels = d.conv_dim();
  p.kernel = d.conv_kernel;
  p.silu = true;
  p.windows = states.conv;
  p.window_stride = states.conv_stride;
  causal_conv_block(Mamba2ConvInput<T>{proj, d}, Mamba2ConvOutput{xbc, d.conv_dim()}, p, seqs);
}

// Block (sequence blockIdx.x, head blockIdx.y), thread p < head_dim owning row p of the head's state S
// (head_dim, state_size), held in shared memory transposed ((state_size, head_dim): the threads read
// consecutive words) with the token's B and C after it (state_size * (head_dim + 2) floats). Token by token:
// dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max); S = S exp(dt A) + (dt x) B^T; y = S C + D x, each
// row summed over the state in order. The state is stored back after the last real row. Sequences of at
// least chunked_from rows are left to the chunked scan (mamba2_chunked_block.cuh).
template <typename T>
__device__ __forceinline__ void mamba2_scan_block(float* __restrict__ y,            // (rows, inner)
                                                  const float* __restrict__ xbc,    // (rows, conv_dim)
                                                  const T* __restrict__ proj,       // (rows, in_proj_dim): dt last
                                                  const float* __restrict__ decay,  // (heads): A, negative
                                                  const float* __restrict__ dt_bias,  // (heads)
                                                  const float* __restrict__ skip,     // (heads): D
                                                  const Mamba2Sizes& d, const RecurrentSeqs& seqs,
                                                  const RecurrentStates& states, float* smem,
                                                  int chunked_from = INT32_MAX) {
  const int s = blockIdx.x, h = blockIdx.y, p = threadIdx.x;
  const int P = d.head_dim, N = d.state_size, g = d.group_of(h);
  const int begin = seqs.begin[s], count = seqs.begin[s + 1] - begin, real = seqs.real[s];
  if (count == 0 || count >= chunked_from) return;
  float* state = states.recurrent + static_cast<int64_t>(seqs.slot[s]) * states.recurrent_stride +
                 static_cast<int64_t>(h) * P * N;
  float* S = smem;           // (N, P)
  float* b_row = S + N * P;  // (N)
  float* c_row = b_row + N;  // (N)
  const bool owner = p < P;
  if (owner) {
    for (int n = 0; n < N; ++n) S[n * P + p] = state[static_cast<int64_t>(p) * N + n];
  }
  const float a = decay[h], bias = dt_bias[h], d_skip = skip[h];
  const float dt_max = d.dt_max > 0.0f ? d.dt_max : INFINITY;
  for (int t = 0; t < count; ++t) {
    const int64_t r = begin + t;
    const float* row = xbc + r * d.conv_dim();
    __syncthreads();  // the previous token's B and C are read
    for (int n = p; n < N; n += blockDim.x) {
      b_row[n] = row[d.inner() + g * N + n];
      c_row[n] = row[d.inner() + d.num_groups * N + g * N + n];
    }
    __syncthreads();
    if (owner) {
      const float raw = to_float(proj[r * d.in_proj_dim() + d.inner() + d.conv_dim() + h]);
      const float dt = fminf(fmaxf(softplus_f(raw + bias), d.dt_min), dt_max);
      const float factor = expf(dt * a), x = row[h * P + p], dx = dt * x;
      float acc = 0.0f;
      for (int n = 0; n < N; ++n) {
        const float v = S[n * P + p] * factor + dx * b_row[n];
        S[n * P + p] = v;
        acc += v * c_row[n];
      }
      y[r * d.inner() + h * P + p] = acc + d_skip * x;
      if (t == real - 1) {
        for (int n = 0; n < N; ++n) state[static_cast<int64_t>(p) * N + n] = S[n * P + p];
      }
    }
  }
}

// Block (row blockIdx.x, group blockIdx.y), one warp: out = RMSNorm(y silu(z)) weight over the group's
// inner / num_groups values, z the first inner values of the in projection's row.
template <typename T>
__device__ __forceinline__ void mamba2_gated_norm_block(T* __restrict__ out,             // (rows, inner)
                                                        const float* __restrict__ y,     // (rows, inner)
                                                        const T* __restrict__ proj,      // (rows, in_proj_dim): z first
                                                        const float* __restrict__ weight,  // (inner)
                                                        const Mamba2Sizes& d, float eps) {
  const int64_t r = blockIdx.x;
  const int width = d.group_width(), first = blockIdx.y * width;
  const float* yr = y + r * d.inner() + first;
  const T* z = proj + r * d.in_proj_dim() + first;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < width; i += 32) {
    const float v = yr[i] * silu_f(to_float(z[i]));
    sum_sq += v * v;
  }
  const float inv_rms = 1.0f / sqrtf(warp_sum(sum_sq) / static_cast<float>(width) + eps);
  T* o = out + r * d.inner() + first;
  for (int i = threadIdx.x; i < width; i += 32) {
    o[i] = from_float<T>(yr[i] * silu_f(to_float(z[i])) * inv_rms * weight[first + i]);
  }
}

}  // namespace cbatch::recurrent_detail
