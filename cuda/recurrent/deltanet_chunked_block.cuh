// The block code of the chunked gated delta rule (deltanet_chunked.cu; the WY form of Yang et al., "Gated
// Delta Networks"). With the token-by-token rule S_t = g_t S_{t-1} + beta_t k_t (v_t - g_t S_{t-1}^T k_t)^T,
// o_t = S_t^T q_t (deltanet_block.cuh), a chunk of rows 0..n-1 starting from state S, G_i = sum_{t<=i} log g_t:
//   A[i][j] = beta_i (k_i . k_j) exp(G_i - G_j) (j < i), T = (I + A)^-1,
//   W = T diag(beta) (exp(G) K), U = T diag(beta) V, V' = U - W S (the rows' deltas beta (v - decayed S^T k)),
//   O = exp(G) Q S + (Q K^T masked j <= i, times exp(G_i - G_j)) V',
//   S <- exp(G_{n-1}) S + (K exp(G_{n-1} - G))^T V'.
// A prepare block per (chunk, value head) computes W, U, the decayed scores and G, which need no state; a
// state block per (sequence, value head, column tile) walks its chunks carrying its columns of S (columns of
// S evolve apart). fp32 on the CUDA cores. Include it as deltanet_block.cuh says (after cuda_dtype.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include "cuda/recurrent/deltanet_shape.hpp"

namespace cbatch::deltanet_detail {

constexpr int kPrepareThreads = 128;
constexpr int kStateCols = 32;  // a state block's columns of S: one warp, a column per lane
constexpr int kRowBlock = 4;    // rows a state block's lane sums at once (kDeltaNetChunk a multiple)
static_assert(kDeltaNetChunk % kRowBlock == 0, "a row block past a chunk would read past the buffer");

// A row's log decay from the decay factor the gates hold; a factor that rounded to 0 counts as exp(-88),
// which is as good as 0 against any later row yet keeps the differences G_i - G_j finite.
__device__ __forceinline__ float log_decay_of(float decay) { return fmaxf(logf(decay), -88.0f); }

// Shared floats of a prepare block: K rows (padded against bank conflicts), T, then G, beta, beta exp(G)
// and a row of T being solved.
__host__ __device__ inline int64_t prepare_smem_floats(const DeltaNetSizes& d) {
  return static_cast<int64_t>(kDeltaNetChunk) * (d.k_head_dim + 1) + kDeltaNetChunk * kDeltaNetChunk +
         4 * kDeltaNetChunk;
}
// Shared floats of a state block: its columns of S, a chunk's rows of W, Q or K, its columns of V'.
__host__ __device__ inline int64_t state_smem_floats(const DeltaNetSizes& d) {
  return static_cast<int64_t>(d.k_head_dim) * kStateCols + static_cast<int64_t>(kDeltaNetChunk) * d.k_head_dim +
         kDeltaNetChunk * kStateCols;
}

// Block (chunk blockIdx.x, value head blockIdx.y): the chunk's W, U, scores and G into the workspace.
__device__ __forceinline__ void chunk_prepare_block(DeltaNetChunkWork work,
                                                    const float* __restrict__ conv_out,  // (rows, conv_dim): q|k|v
                                                    const float* __restrict__ gates,  // (rows, 2 num_v_heads)
                                                    DeltaNetSizes d, DeltaNetChunks chunks, float* smem) {
  constexpr int C = kDeltaNetChunk;
  const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, nt = blockDim.x;
  const int first = chunks.rows[2 * c], n = chunks.rows[2 * c + 1];
  const int dk = d.k_head_dim, dv = d.v_head_dim, nv = d.num_v_heads, kh = d.key_head_of(h), ks = dk + 1;
  const int conv_dim = d.conv_dim();
  float* K = smem;          // (C, dk + 1)
  float* T = K + C * ks;    // (C, C): A, then (I + A)^-1
  float* G = T + C * C;     // (C)
  float* beta = G + C;      // (C)
  float* beta_decayed = beta + C;  // (C) beta exp(G)
  float* row = beta_decayed + C;   // (C) a row of T being solved
  for (int x = tid; x < n * dk; x += nt) {
    const int i = x / dk, m = x % dk;
    K[i * ks + m] = conv_out[static_cast<int64_t>(first + i) * conv_dim + d.key_dim() + kh * dk + m];
  }
  if (tid == 0) {  // the cumulative sum in row order
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int64_t r = first + i;
      acc += log_decay_of(gates[r * 2 * nv + nv + h]);
      G[i] = acc;
      beta[i] = gates[r * 2 * nv + h];
      beta_decayed[i] = beta[i] * expf(acc);
      work.log_decay[r * nv + h] = acc;
    }
  }
  __syncthreads();
  for (int x = tid; x < C * C; x += nt) {  // A, strictly lower (zero elsewhere and past n)
    const int i = x / C, j = x % C;
    float a = 0.0f;
    if (j < i && i < n) {
      for (int m = 0; m < dk; ++m) a += K[i * ks + m] * K[j * ks + m];
      a *= beta[i] * expf(G[i] - G[j]);
    }
    T[x] = a;
  }
  __syncthreads();
  // Forward substitution, row by row: T[i][j] = -(A[i][j] + sum_{j<m<i} A[i][m] T[m][j]) for j < i.
  for (int i = 1; i < n; ++i) {
    for (int j = tid; j < i; j += nt) {
      float acc = T[i * C + j];
      for (int m = j + 1; m < i; ++m) acc += T[i * C + m] * T[m * C + j];
      row[j] = -acc;
    }
    __syncthreads();
    for (int j = tid; j < i; j += nt) T[i * C + j] = row[j];
    __syncthreads();
  }
  for (int i = tid; i < n; i += nt) T[i * C + i] = 1.0f;
  __syncthreads();
  // W = T diag(beta exp(G)) K and U = T diag(beta) V, row i summing rows t <= i.
  for (int x = tid; x < n * (dk + dv); x += nt) {
    const int i = x / (dk + dv), m = x % (dk + dv);
    const int64_t r = first + i;
    float acc = 0.0f;
    if (m < dk) {
      for (int t = 0; t <= i; ++t) acc += T[i * C + t] * beta_decayed[t] * K[t * ks + m];
      work.w[(r * nv + h) * dk + m] = acc;
    } else {
      const float* v = conv_out + static_cast<int64_t>(first) * conv_dim + 2 * d.key_dim() + h * dv + (m - dk);
      for (int t = 0; t <= i; ++t) acc += T[i * C + t] * beta[t] * v[static_cast<int64_t>(t) * conv_dim];
      work.u[(r * nv + h) * dv + m - dk] = acc;
    }
  }
  // scores[i][j] = (q_i . k_j) exp(G_i - G_j) for j <= i, zero after.
  for (int x = tid; x < n * C; x += nt) {
    const int i = x / C, j = x % C;
    const int64_t r = first + i;
    float acc = 0.0f;
    if (j <= i) {
      const float* q = conv_out + r * conv_dim + kh * dk;
      for (int m = 0; m < dk; ++m) acc += q[m] * K[j * ks + m];
      acc *= expf(G[i] - G[j]);
    }
    work.scores[(r * nv + h) * C + j] = acc;
  }
}

// out[t] = buf row (i0 + t) . column lane of S for t < kRowBlock, each summed over m in order: one read of S
// for kRowBlock rows, and as many independent sums. Rows past the chunk's are read (inside buf) and unused.
__device__ __forceinline__ void rows_times_column(float* out, const float* buf, int i0, int dk, const float* S,
                                                  int lane) {
#pragma unroll
  for (int t = 0; t < kRowBlock; ++t) out[t] = 0.0f;
  for (int m = 0; m < dk; ++m) {
    const float s = S[m * kStateCols + lane];
#pragma unroll
    for (int t = 0; t < kRowBlock; ++t) out[t] += buf[(i0 + t) * dk + m] * s;
  }
}

// Loads rows [first, first + n) of a (rows, stride) matrix at src (a head's dk values from each row) into
// buf (n, dk), the block's threads striding.
__device__ __forceinline__ void load_chunk_rows(float* buf, const float* __restrict__ src, int64_t first, int n,
                                                int64_t stride, int dk) {
  for (int x = threadIdx.x; x < n * dk; x += blockDim.x) {
    const int i = x / dk, m = x % dk;
    buf[x] = src[(first + i) * stride + m];
  }
}

// Block (chunked sequence blockIdx.x, value head blockIdx.y, columns blockIdx.z * kStateCols on), one
// thread per column j of S: walks the sequence's chunks in order; per chunk V' = U - W S, the outputs
// O = exp(G) Q S + scores V' into core, then S <- exp(G_last) S + (K exp(G_last - G))^T V'. The state is
// stored back after the chunk that ends the real rows (padding rows come in chunks of their own).
__device__ __forceinline__ void chunk_state_block(float* __restrict__ core,  // (rows, value_dim)
                                                  const float* __restrict__ conv_out,  // (rows, conv_dim)
                                                  DeltaNetChunkWork work, DeltaNetSizes d, DeltaNetSeqs seqs,
                                                  DeltaNetChunks chunks, DeltaNetStates states, float* smem) {
  constexpr int C = kDeltaNetChunk;
  const int list = blockIdx.x, h = blockIdx.y, lane = threadIdx.x, col = blockIdx.z * kStateCols + lane;
  const int dk = d.k_head_dim, dv = d.v_head_dim, nv = d.num_v_heads, kh = d.key_head_of(h);
  const int64_t conv_dim = d.conv_dim();
  const int s = chunks.seq[list];
  const int real_end = seqs.begin[s] + seqs.real[s];
  float* state = states.recurrent + static_cast<int64_t>(seqs.slot[s]) * states.recurrent_stride +
                 static_cast<int64_t>(h) * dk * dv;
  float* S = smem;                 // (dk, kStateCols)
  float* buf = S + dk * kStateCols;  // (C, dk) W, Q or K rows
  float* delta = buf + C * dk;     // (C, kStateCols) V'
  const bool owner = col < dv;
  for (int m = 0; m < dk; ++m) S[m * kStateCols + lane] = owner ? state[static_cast<int64_t>(m) * dv + col] : 0.0f;
  for (int c = chunks.seq_chunks[list]; c < chunks.seq_chunks[list + 1]; ++c) {
    const int first = chunks.rows[2 * c], n = chunks.rows[2 * c + 1];
    const float* G = work.log_decay;  // (rows, nv)
    __syncthreads();  // the previous chunk's K rows are read
    load_chunk_rows(buf, work.w + h * dk, first, n, static_cast<int64_t>(nv) * dk, dk);
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += kRowBlock) {  // V' = U - W S
      float ws[kRowBlock];
      rows_times_column(ws, buf, i0, dk, S, lane);
#pragma unroll
      for (int t = 0; t < kRowBlock; ++t) {  // unrolled, so that ws stays in registers
        const int i = i0 + t;
        if (i >= n) break;
        const float u = owner ? work.u[(static_cast<int64_t>(first + i) * nv + h) * dv + col] : 0.0f;
        delta[i * kStateCols + lane] = u - ws[t];
      }
    }
    __syncthreads();
    load_chunk_rows(buf, conv_out + kh * dk, first, n, conv_dim, dk);
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += kRowBlock) {  // O = exp(G) Q S + scores V'
      float qs[kRowBlock];
      rows_times_column(qs, buf, i0, dk, S, lane);
#pragma unroll
      for (int t = 0; t < kRowBlock; ++t) {
        const int i = i0 + t;
        if (i >= n) break;
        const int64_t r = first + i;
        float o = expf(G[r * nv + h]) * qs[t];
        const float* score = work.scores + (r * nv + h) * C;
        for (int j = 0; j <= i; ++j) o += score[j] * delta[j * kStateCols + lane];
        if (owner) core[r * d.value_dim() + h * dv + col] = o;
      }
    }
    __syncthreads();
    load_chunk_rows(buf, conv_out + d.key_dim() + kh * dk, first, n, conv_dim, dk);
    __syncthreads();
    const float g_last = G[static_cast<int64_t>(first + n - 1) * nv + h];
    for (int i = 0; i < n; ++i) {  // V' rows scaled by exp(G_last - G_i), once
      delta[i * kStateCols + lane] *= expf(g_last - G[static_cast<int64_t>(first + i) * nv + h]);
    }
    const float decay = expf(g_last);
    for (int m0 = 0; m0 < dk; m0 += kRowBlock) {  // kRowBlock rows of S at once, each summed over i in order
      float acc[kRowBlock];
#pragma unroll
      for (int t = 0; t < kRowBlock; ++t) acc[t] = decay * S[min(m0 + t, dk - 1) * kStateCols + lane];
      for (int i = 0; i < n; ++i) {
        const float v = delta[i * kStateCols + lane];
#pragma unroll
        for (int t = 0; t < kRowBlock; ++t) acc[t] += buf[i * dk + min(m0 + t, dk - 1)] * v;
      }
      for (int t = 0; t < kRowBlock && m0 + t < dk; ++t) S[(m0 + t) * kStateCols + lane] = acc[t];
    }
    if (owner && first + n == real_end) {
      for (int m = 0; m < dk; ++m) state[static_cast<int64_t>(m) * dv + col] = S[m * kStateCols + lane];
    }
  }
}

}  // namespace cbatch::deltanet_detail
