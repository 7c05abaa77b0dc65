// The block code of the gated DeltaNet layer's steps between its products (deltanet.cu, whose header
// describes the layouts): the causal conv with its window, the q/k L2 norms with beta and the decay, the
// delta rule over each sequence's rows in token order, and the gated RMSNorm. It uses no CUDA header of its
// own: include it after cuda_dtype.cuh (to_float, from_float, warp_sum), or on the host after
// tests/cuda/block_emulator.hpp and then cuda_dtype.cuh (tests/cuda/test_deltanet_emulated.cpp).
// Every value is computed from its own sequence's rows in a fixed order, as the CPU's cpu_deltanet.cpp does:
// a prompt prefilled in chunks leaves the same state, bit for bit, as one prefilled whole.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch::deltanet_detail {

constexpr int kConvThreads = 128;
constexpr int kGateThreads = 128;  // a warp per key head, strided
constexpr int kNormThreads = 32;   // a warp per (row, value head)

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float siluf(float x) { return x * sigmoidf(x); }
__device__ __forceinline__ float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Block (sequence blockIdx.x, channels from blockIdx.y * blockDim.x): out = silu(conv(taps, window | rows))
// over the q|k|v channels of proj, one channel per thread in the rows' order; the window becomes the last
// conv_kernel - 1 real inputs.
template <typename T>
__device__ __forceinline__ void conv_block(float* __restrict__ out,          // (rows, conv_dim)
                                           const T* __restrict__ proj,       // (rows, proj_dim)
                                           const float* __restrict__ taps,   // (conv_dim, conv_kernel)
                                           DeltaNetSizes d, DeltaNetSeqs seqs, DeltaNetStates states) {
  const int s = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
  const int channels = d.conv_dim(), kernel = d.conv_kernel, width = kernel - 1;
  if (c >= channels) return;
  const int begin = seqs.begin[s], count = seqs.begin[s + 1] - begin, real = seqs.real[s];
  if (count == 0) return;
  float* window = states.conv + static_cast<int64_t>(seqs.slot[s]) * states.conv_stride;
  float history[kMaxConvKernel];  // history[j]: the input j - width rows before the current one
  float tap[kMaxConvKernel];
  for (int j = 0; j < kernel; ++j) tap[j] = taps[static_cast<int64_t>(c) * kernel + j];
  for (int j = 0; j < width; ++j) history[j] = window[static_cast<int64_t>(j) * channels + c];
  for (int t = 0; t < count; ++t) {
    const int64_t r = begin + t;
    history[width] = to_float(proj[r * d.proj_dim() + c]);
    float acc = 0.0f;
    for (int j = 0; j < kernel; ++j) acc += tap[j] * history[j];
    out[r * channels + c] = siluf(acc);
    for (int j = 0; j < width; ++j) history[j] = history[j + 1];
    if (t == real - 1) {
      for (int j = 0; j < width; ++j) window[static_cast<int64_t>(j) * channels + c] = history[j];
    }
  }
}

// Block (row blockIdx.x): q and k of conv_out L2-normed per key head in place (x / sqrt(sum x^2 + 1e-6), q
// also scaled by k_head_dim^-1/2), a warp per head; gates (rows, 2 num_v_heads): beta = sigmoid(b) and the
// decay factor exp(A softplus(a + dt_bias)) per value head, from ba (rows, [b | a]).
template <typename T>
__device__ __forceinline__ void gates_block(float* __restrict__ conv_out,      // (rows, conv_dim)
                                            float* __restrict__ gates,         // (rows, 2 num_v_heads)
                                            const T* __restrict__ ba,          // (rows, 2 num_v_heads)
                                            const float* __restrict__ decay,   // (num_v_heads): A, negative
                                            const float* __restrict__ dt_bias,  // (num_v_heads)
                                            DeltaNetSizes d) {
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32, dk = d.k_head_dim;
  float* qk = conv_out + r * d.conv_dim();
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  for (int head = warp; head < 2 * d.num_k_heads; head += warps) {  // q heads, then k heads
    float* x = qk + static_cast<int64_t>(head) * dk;
    float sum_sq = 0.0f;
    for (int i = lane; i < dk; i += 32) sum_sq += x[i] * x[i];
    const float inv = (head < d.num_k_heads ? q_scale : 1.0f) / sqrtf(warp_sum(sum_sq) + 1e-6f);
    for (int i = lane; i < dk; i += 32) x[i] *= inv;
  }
  const int nv = d.num_v_heads;
  const T* b = ba + r * 2 * nv;
  for (int h = threadIdx.x; h < nv; h += blockDim.x) {
    gates[r * 2 * nv + h] = sigmoidf(to_float(b[h]));
    gates[r * 2 * nv + nv + h] = expf(decay[h] * softplusf(to_float(b[nv + h]) + dt_bias[h]));
  }
}

// Block (sequence blockIdx.x, value head blockIdx.y), thread j < v_head_dim owning column j of the head's
// state S (k_head_dim, v_head_dim), held in shared memory (k_head_dim * (v_head_dim + 2) floats: S, then the
// token's q and k). Token by token: S *= decay; S += k (beta (v - k S)); o = q S, each column summed over i in
// order. The state is stored back after the last real row. Sequences marked chunked are left to the chunked
// kernels (deltanet_chunked_block.cuh).
__device__ __forceinline__ void delta_rule_block(float* __restrict__ core,         // (rows, value_dim)
                                                 const float* __restrict__ conv_out,  // (rows, conv_dim): q|k|v
                                                 const float* __restrict__ gates,     // (rows, 2 num_v_heads)
                                                 DeltaNetSizes d, DeltaNetSeqs seqs, DeltaNetStates states,
                                                 float* smem) {
  const int s = blockIdx.x, h = blockIdx.y, j = threadIdx.x;
  const int dk = d.k_head_dim, dv = d.v_head_dim, nv = d.num_v_heads, kh = d.key_head_of(h);
  const int begin = seqs.begin[s], count = seqs.begin[s + 1] - begin, real = seqs.real[s];
  if (count == 0 || (seqs.chunked != nullptr && seqs.chunked[s] != 0)) return;
  float* state = states.recurrent + static_cast<int64_t>(seqs.slot[s]) * states.recurrent_stride +
                 static_cast<int64_t>(h) * dk * dv;
  float* S = smem;               // (dk, dv)
  float* q_row = S + dk * dv;    // (dk)
  float* k_row = q_row + dk;     // (dk)
  const bool owner = j < dv;
  if (owner) {
    for (int i = 0; i < dk; ++i) S[i * dv + j] = state[static_cast<int64_t>(i) * dv + j];
  }
  for (int t = 0; t < count; ++t) {
    const int64_t r = begin + t;
    const float* row = conv_out + r * d.conv_dim();
    __syncthreads();  // the previous token's q and k are read
    for (int i = j; i < dk; i += blockDim.x) {
      q_row[i] = row[kh * dk + i];
      k_row[i] = row[d.key_dim() + kh * dk + i];
    }
    __syncthreads();
    if (owner) {
      const float beta = gates[r * 2 * nv + h], decay = gates[r * 2 * nv + nv + h];
      const float v = row[2 * d.key_dim() + h * dv + j];
      float ks = 0.0f;
      for (int i = 0; i < dk; ++i) {
        S[i * dv + j] *= decay;
        ks += k_row[i] * S[i * dv + j];
      }
      const float delta = (v - ks) * beta;
      float o = 0.0f;
      for (int i = 0; i < dk; ++i) {
        S[i * dv + j] += k_row[i] * delta;
        o += q_row[i] * S[i * dv + j];
      }
      core[r * d.value_dim() + h * dv + j] = o;
      if (t == real - 1) {
        for (int i = 0; i < dk; ++i) state[static_cast<int64_t>(i) * dv + j] = S[i * dv + j];
      }
    }
  }
}

// Block (row blockIdx.x, value head blockIdx.y), one warp: out = RMSNorm(o) w silu(z), o the head's delta
// rule output, z its gate from proj.
template <typename T>
__device__ __forceinline__ void gated_norm_block(T* __restrict__ out,             // (rows, value_dim)
                                                 const float* __restrict__ core,   // (rows, value_dim)
                                                 const T* __restrict__ proj,       // (rows, proj_dim): z last
                                                 const float* __restrict__ weight,  // (v_head_dim)
                                                 DeltaNetSizes d, float eps) {
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y, dv = d.v_head_dim;
  const float* o = core + r * d.value_dim() + h * dv;
  const T* z = proj + r * d.proj_dim() + d.conv_dim() + h * dv;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < dv; i += 32) sum_sq += o[i] * o[i];
  const float inv_rms = 1.0f / sqrtf(warp_sum(sum_sq) / static_cast<float>(dv) + eps);
  T* y = out + r * d.value_dim() + h * dv;
  for (int i = threadIdx.x; i < dv; i += 32) y[i] = from_float<T>(o[i] * inv_rms * weight[i] * siluf(to_float(z[i])));
}

}  // namespace cbatch::deltanet_detail
