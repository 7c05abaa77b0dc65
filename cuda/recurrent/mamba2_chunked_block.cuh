// The block code of the chunked Mamba-2 scan (mamba2_chunked.cu; the state space duality form) for the
// sequences of a step with at least kMambaChunkRows rows. A sequence's rows are cut into chunks of Q =
// kMambaChunkRows from its first row in the batch (the last may be partial). With dt_t clamped as
// mamba2_scan_block does, a_t = dt_t A and cum_i = a_0 + ... + a_i inside the chunk, S0 the state at its start:
//   y_i   = exp(cum_i) S0 C_i + sum_{j<=i} exp(cum_i - cum_j) dt_j (C_i . B_j) x_j + D x_i
//   S_end = exp(cum_last) S0 + sum_{j<=last} exp(cum_last - cum_j) dt_j x_j B_j^T
// The intra-chunk part (no state) is a block per (chunk, head, sequence); the state part a block per (32 rows
// of a head's state, sequence) walking the chunks. Padding rows are computed from the state and leave it as it
// was (the state is stored as of the last real row). fp32 on CUDA cores, 16 x 16 threads each holding a 4 x 4
// (intra-chunk) or 4 x 2 (state) tile of a product.
// Equal to the token-by-token scan up to rounding. Include it as causal_conv_block.cuh says.
#pragma once
#include <cstdint>

#include "cuda/recurrent/mamba2_block.cuh"

namespace cbatch::recurrent_detail {

using deltanet_detail::kMambaChunkRows;
constexpr int kChunkThreads = 256;  // 16 x 16, a 4 x 4 tile each of a 64 x 64 product
constexpr int kChunkCols = 32;      // state columns of a shared tile of B or C in the intra-chunk block
constexpr int kStateCols = 64;      // and in the state block
constexpr int kChunkOut = 64;       // head_dim columns of an output tile of the intra-chunk block
constexpr int kStateRows = 32;      // rows of a head's S a state block holds: a head over head_dim / 32 blocks
constexpr int kStateUnroll = kStateRows / 16;  // a state block thread's rows of S in a tile
static_assert(kMambaChunkRows == 64, "a chunk is 16 threads x 4 rows");

// Floats of shared memory: the intra-chunk block (dt, cum, the masked Q x Q matrix, then B and C tiles or an x
// tile) and the state block (dt, cum, its rows of S (kStateRows, state + 1), their weighted x (Q, kStateRows),
// a B or C tile); the state blocks a head takes.
__host__ __device__ inline int chunk_intra_floats() {
  const int tiles = 2 * kMambaChunkRows * (kChunkCols + 1), x = kMambaChunkRows * kChunkOut;
  return 2 * kMambaChunkRows + kMambaChunkRows * (kMambaChunkRows + 1) + (tiles > x ? tiles : x);
}
__host__ __device__ inline int chunk_state_floats(const Mamba2Sizes& d) {
  return 2 * kMambaChunkRows + kStateRows * (d.state_size + 1) + kMambaChunkRows * kStateRows +
         kMambaChunkRows * (kStateCols + 1);
}
__host__ __device__ inline int chunk_state_parts(const Mamba2Sizes& d) {
  return (d.head_dim + kStateRows - 1) / kStateRows;
}

// dt (Q) and cum (Q) of head h for the chunk's rows [first, first + rows): dt as mamba2_scan_block, cum summed
// in row order by one thread (the same values in both kernels).
template <typename T>
__device__ __forceinline__ void chunk_decays(float* dt, float* cum, const T* __restrict__ proj, int64_t first,
                                             int rows, int h, float a, float bias, const Mamba2Sizes& d) {
  const float dt_max = d.dt_max > 0.0f ? d.dt_max : INFINITY;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    const float raw = to_float(proj[(first + i) * d.in_proj_dim() + d.inner() + d.conv_dim() + h]);
    dt[i] = fminf(fmaxf(softplus_f(raw + bias), d.dt_min), dt_max);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float run = 0.0f;
    for (int i = 0; i < rows; ++i) {
      run += dt[i] * a;
      cum[i] = run;
    }
  }
  __syncthreads();
}

// tile (Q, kCols + 1) = columns [n0, n0 + kCols) of the chunk's rows of xbc from column `offset` (a group's B
// or C), zero past the rows, past the state and past `last_row`.
template <int kCols>
__device__ __forceinline__ void load_state_tile(float* tile, const float* __restrict__ xbc, int64_t first,
                                               int last_row, int offset, int n0, const Mamba2Sizes& d) {
  for (int e = threadIdx.x; e < kMambaChunkRows * kCols; e += blockDim.x) {
    const int i = e / kCols, k = e % kCols;
    tile[i * (kCols + 1) + k] =
        i <= last_row && n0 + k < d.state_size ? xbc[(first + i) * d.conv_dim() + offset + n0 + k] : 0.0f;
  }
}

// Block (chunk blockIdx.x, head blockIdx.y, sequence blockIdx.z) of a sequence with at least Q rows:
// y_i = sum_{j<=i} exp(cum_i - cum_j) dt_j (C_i . B_j) x_j + D x_i for the chunk's rows (the state's part is
// added by mamba2_chunk_state_block).
template <typename T>
__device__ __forceinline__ void mamba2_chunk_intra_block(float* __restrict__ y,            // (rows, inner)
                                                         const float* __restrict__ xbc,    // (rows, conv_dim)
                                                         const T* __restrict__ proj,       // (rows, in_proj_dim)
                                                         const float* __restrict__ decay,  // (heads): A
                                                         const float* __restrict__ dt_bias,  // (heads)
                                                         const float* __restrict__ skip,     // (heads): D
                                                         const Mamba2Sizes& d, const RecurrentSeqs& seqs,
                                                         float* smem) {
  constexpr int Q = kMambaChunkRows, W = kChunkCols + 1;
  const int c = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const int begin = seqs.begin[s], count = seqs.begin[s + 1] - begin;
  if (count < Q || c * Q >= count) return;
  const int rows = count - c * Q < Q ? count - c * Q : Q, P = d.head_dim, N = d.state_size, g = d.group_of(h);
  const int64_t first = begin + static_cast<int64_t>(c) * Q;
  float* dt = smem;                // (Q)
  float* cum = dt + Q;             // (Q)
  float* m = cum + Q;              // (Q, Q + 1): the masked, decayed C B^T
  float* c_tile = m + Q * (Q + 1);  // (Q, W)
  float* b_tile = c_tile + Q * W;   // (Q, W)
  float* x_tile = c_tile;           // (Q, kChunkOut), once the products of C and B are done
  chunk_decays(dt, cum, proj, first, rows, h, decay[h], dt_bias[h], d);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int n0 = 0; n0 < N; n0 += kChunkCols) {
    load_state_tile<kChunkCols>(c_tile, xbc, first, rows - 1, d.inner() + d.num_groups * N + g * N, n0, d);
    load_state_tile<kChunkCols>(b_tile, xbc, first, rows - 1, d.inner() + g * N, n0, d);
    __syncthreads();
    for (int k = 0; k < kChunkCols; ++k) {
      float ci[4], bj[4];
      #pragma unroll
      for (int u = 0; u < 4; ++u) ci[u] = c_tile[(ty + 16 * u) * W + k];
      #pragma unroll
      for (int v = 0; v < 4; ++v) bj[v] = b_tile[(tx + 16 * v) * W + k];
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        #pragma unroll
        for (int v = 0; v < 4; ++v) acc[u][v] += ci[u] * bj[v];
      }
    }
    __syncthreads();
  }
  #pragma unroll
  for (int u = 0; u < 4; ++u) {
    #pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int i = ty + 16 * u, j = tx + 16 * v;
      m[i * (Q + 1) + j] = j <= i && i < rows ? acc[u][v] * expf(cum[i] - cum[j]) * dt[j] : 0.0f;
    }
  }
  const float d_skip = skip[h];
  for (int p0 = 0; p0 < P; p0 += kChunkOut) {
    __syncthreads();  // m written; the previous x tile read
    for (int e = threadIdx.x; e < Q * kChunkOut; e += blockDim.x) {
      const int j = e / kChunkOut, k = e % kChunkOut;
      x_tile[e] = j < rows && p0 + k < P ? xbc[(first + j) * d.conv_dim() + h * P + p0 + k] : 0.0f;
    }
    __syncthreads();
    float out[4][4] = {};
    for (int j = 0; j < rows; ++j) {
      float mi[4], xj[4];
      #pragma unroll
      for (int u = 0; u < 4; ++u) mi[u] = m[(ty + 16 * u) * (Q + 1) + j];
      #pragma unroll
      for (int v = 0; v < 4; ++v) xj[v] = x_tile[j * kChunkOut + tx + 16 * v];
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        #pragma unroll
        for (int v = 0; v < 4; ++v) out[u][v] += mi[u] * xj[v];
      }
    }
    #pragma unroll
    for (int u = 0; u < 4; ++u) {
      #pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int i = ty + 16 * u, k = tx + 16 * v;
        if (i < rows && p0 + k < P) {
          y[(first + i) * d.inner() + h * P + p0 + k] = out[u][v] + d_skip * x_tile[i * kChunkOut + k];
        }
      }
    }
  }
}

// dst (rows, state) = exp(cum_last) S + sum_{j<=last} exp(cum_last - cum_j) dt_j x_j B_j^T for the block's
// rows [p_lo, p_lo + rows) of the head's state, dst either S itself (stride state + 1: each thread rewrites
// only what it read) or the slot's rows (stride state). A kStateUnroll x 4 tile of (p, n) a thread.
__device__ __forceinline__ void chunk_advance(float* dst, int64_t dst_stride, const float* S, float* xw, float* tile,
                                              const float* dt, const float* cum, int last,
                                              const float* __restrict__ xbc, int64_t first, int h, int g, int p_lo,
                                              int rows, const Mamba2Sizes& d) {
  constexpr int W = kStateCols + 1;
  const int N = d.state_size, tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const float* x = xbc + h * d.head_dim + p_lo;
  for (int e = threadIdx.x; e < kMambaChunkRows * kStateRows; e += blockDim.x) {
    const int j = e / kStateRows, p = e % kStateRows;
    xw[e] = j <= last && p < rows ? expf(cum[last] - cum[j]) * dt[j] * x[(first + j) * d.conv_dim() + p] : 0.0f;
  }
  const float factor = expf(cum[last]);
  for (int n0 = 0; n0 < N; n0 += kStateCols) {
    load_state_tile<kStateCols>(tile, xbc, first, last, d.inner() + g * N, n0, d);
    __syncthreads();  // xw and the tile written
    float acc[kStateUnroll][4] = {};
    for (int j = 0; j <= last; ++j) {
      float xp[kStateUnroll], bn[4];
      #pragma unroll
      for (int u = 0; u < kStateUnroll; ++u) xp[u] = xw[j * kStateRows + ty + 16 * u];
      #pragma unroll
      for (int v = 0; v < 4; ++v) bn[v] = tile[j * W + tx + 16 * v];
      #pragma unroll
      for (int u = 0; u < kStateUnroll; ++u) {
        #pragma unroll
        for (int v = 0; v < 4; ++v) acc[u][v] += xp[u] * bn[v];
      }
    }
    #pragma unroll
    for (int u = 0; u < kStateUnroll; ++u) {
      #pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int p = ty + 16 * u, n = n0 + tx + 16 * v;
        if (p < rows && n < N) dst[p * dst_stride + n] = factor * S[p * (N + 1) + n] + acc[u][v];
      }
    }
    __syncthreads();  // the tile read
  }
}

// Block (head and part blockIdx.x: head blockIdx.x / parts, rows [32 part, 32 part + 32) of its state; sequence
// blockIdx.y) of a sequence with at least Q rows: the rows of S from the slot, then per chunk
// y_i += exp(cum_i) S C_i for those rows' outputs and S advanced over the chunk (the rows of S evolve apart);
// the slot gets S as of the last real row.
template <typename T>
__device__ __forceinline__ void mamba2_chunk_state_block(float* __restrict__ y,            // (rows, inner)
                                                         const float* __restrict__ xbc,    // (rows, conv_dim)
                                                         const T* __restrict__ proj,       // (rows, in_proj_dim)
                                                         const float* __restrict__ decay,  // (heads): A
                                                         const float* __restrict__ dt_bias,  // (heads)
                                                         const Mamba2Sizes& d, const RecurrentSeqs& seqs,
                                                         const RecurrentStates& states, float* smem) {
  constexpr int Q = kMambaChunkRows, W = kStateCols + 1;
  const int parts = chunk_state_parts(d), h = blockIdx.x / parts, s = blockIdx.y;
  const int begin = seqs.begin[s], count = seqs.begin[s + 1] - begin, real = seqs.real[s];
  if (count < Q) return;
  const int P = d.head_dim, N = d.state_size, g = d.group_of(h), p_lo = (blockIdx.x % parts) * kStateRows;
  const int my_rows = P - p_lo < kStateRows ? P - p_lo : kStateRows;
  float* state = states.recurrent + static_cast<int64_t>(seqs.slot[s]) * states.recurrent_stride +
                 (static_cast<int64_t>(h) * P + p_lo) * N;  // (my_rows, state)
  float* dt = smem;                      // (Q)
  float* cum = dt + Q;                   // (Q)
  float* S = cum + Q;                    // (kStateRows, state + 1)
  float* xw = S + kStateRows * (N + 1);  // (Q, kStateRows): weighted x
  float* tile = xw + Q * kStateRows;     // (Q, W): a tile of C or B
  for (int e = threadIdx.x; e < my_rows * N; e += blockDim.x) S[(e / N) * (N + 1) + e % N] = state[e];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float* y_head = y + h * P + p_lo;
  for (int c0 = 0; c0 < count; c0 += Q) {
    const int rows = count - c0 < Q ? count - c0 : Q;
    const int64_t first = begin + c0;
    chunk_decays(dt, cum, proj, first, rows, h, decay[h], dt_bias[h], d);  // syncs: S loaded or advanced
    float acc[4][kStateUnroll] = {};
    for (int n0 = 0; n0 < N; n0 += kStateCols) {
      load_state_tile<kStateCols>(tile, xbc, first, rows - 1, d.inner() + d.num_groups * N + g * N, n0, d);
      __syncthreads();
      const int cols = N - n0 < kStateCols ? N - n0 : kStateCols;
      for (int k = 0; k < cols; ++k) {
        float ci[4], sp[kStateUnroll];
        #pragma unroll
        for (int u = 0; u < 4; ++u) ci[u] = tile[(ty + 16 * u) * W + k];
        #pragma unroll
        for (int v = 0; v < kStateUnroll; ++v) {
          const int p = tx + 16 * v;
          sp[v] = S[(p < my_rows ? p : my_rows - 1) * (N + 1) + n0 + k];
        }
        #pragma unroll
        for (int u = 0; u < 4; ++u) {
          #pragma unroll
          for (int v = 0; v < kStateUnroll; ++v) acc[u][v] += ci[u] * sp[v];
        }
      }
      __syncthreads();  // the tile read
    }
    #pragma unroll
    for (int u = 0; u < 4; ++u) {
      #pragma unroll
      for (int v = 0; v < kStateUnroll; ++v) {
        const int i = ty + 16 * u, p = tx + 16 * v;
        if (i < rows && p < my_rows) y_head[(first + i) * d.inner() + p] += expf(cum[i]) * acc[u][v];
      }
    }
    if (c0 < real && real < c0 + rows) {  // the real rows end inside the chunk: the slot gets S there
      chunk_advance(state, N, S, xw, tile, dt, cum, real - c0 - 1, xbc, first, h, g, p_lo, my_rows, d);
    }
    chunk_advance(S, N + 1, S, xw, tile, dt, cum, rows - 1, xbc, first, h, g, p_lo, my_rows, d);
    if (real == c0 + rows) {
      for (int e = threadIdx.x; e < my_rows * N; e += blockDim.x) state[e] = S[(e / N) * (N + 1) + e % N];
    }
  }
}

}  // namespace cbatch::recurrent_detail
