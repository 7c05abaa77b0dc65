// The device log-softmax and top-k of logprob queries (launched by logprob_rows.cu): one block of 256
// threads per query reduces its logits row to the query's k values, so only those come back to the host.
// Each thread walks a strided share of the row: the max (NaN ignored), then the sum of e^(logit - max) in
// double, each reduced over the warp by xor shuffles and over the block in warp order (a fixed order, so
// a row gives the same bits on every run); then k rounds of a block argmax over the (logit desc, id asc)
// order of radix_sampling::sort_key (NaN last), each round below the previous pick. Includes no CUDA
// header and uses only threadIdx, blockIdx, __syncthreads and warp shuffles, so that the host tests run it
// through the block emulator (tests/cuda/block_emulator.hpp) where there is no GPU.
#pragma once
#include <math.h>

#include <cstdint>

#include "cuda/sampling/logprob_tasks.hpp"
#include "engine/sample/radix_sampling.hpp"

namespace cbatch::device_logprobs {

constexpr int kLogprobThreads = 256;
constexpr int kLogprobWarps = kLogprobThreads / 32;
constexpr unsigned kLogprobMask = 0xFFFFFFFFu;

struct LogprobShared {
  float warp_max[kLogprobWarps];
  double warp_sum[kLogprobWarps];
  uint64_t warp_key[kLogprobWarps];
  float max;
  double lse;
  uint64_t key;
};

// The block's largest `v` (each thread gives its own; every thread gets the result): warp shuffles, then
// thread 0 over the warps' slots. A NaN never wins (only a larger value replaces the one held).
template <typename V>
__device__ inline V block_reduce_max(V v, V* warp_slots, V& result) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const V other = __shfl_xor_sync(kLogprobMask, v, offset);
    v = other > v ? other : v;
  }
  if (threadIdx.x % 32 == 0) warp_slots[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    V b = warp_slots[0];
    for (int w = 1; w < kLogprobWarps; ++w) b = warp_slots[w] > b ? warp_slots[w] : b;
    result = b;
  }
  __syncthreads();
  return result;
}

__device__ inline float block_max(const float* row, int vocab, LogprobShared& s) {
  float m = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += kLogprobThreads) m = row[i] > m ? row[i] : m;
  return block_reduce_max(m, s.warp_max, s.max);
}

// log(sum of e^(logit - max)) + max, in double.
__device__ inline double block_lse(const float* row, int vocab, float max, LogprobShared& s) {
  double sum = 0.0;
  if (max > -INFINITY && max < INFINITY) {
    for (int i = threadIdx.x; i < vocab; i += kLogprobThreads) {
      if (row[i] == row[i]) sum += exp(static_cast<double>(row[i]) - max);  // NaN adds nothing, as on the host
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kLogprobMask, sum, offset);
  if (threadIdx.x % 32 == 0) s.warp_sum[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kLogprobWarps; ++w) total += s.warp_sum[w];
    s.lse = static_cast<double>(max) + log(total);
  }
  __syncthreads();
  return s.lse;
}

// The largest sort key below `below` over the row (0 when none is left).
__device__ inline uint64_t block_next_key(const float* row, int vocab, uint64_t below, LogprobShared& s) {
  uint64_t best = 0;
  for (int i = threadIdx.x; i < vocab; i += kLogprobThreads) {
    const uint64_t key = radix_sampling::sort_key(row[i], i);
    if (key < below && key > best) best = key;
  }
  return block_reduce_max(best, s.warp_key, s.key);
}

// Block blockIdx.x answers task blockIdx.x.
__device__ inline void logprob_block_row(const float* logits, const int32_t* token_ids, const LogprobTask* tasks,
                                         int vocab, const LogprobOutputs& out, LogprobShared& s) {
  const LogprobTask task = tasks[blockIdx.x];
  const float* row = logits + static_cast<size_t>(task.logits_row) * vocab;
  const float max = block_max(row, vocab, s);
  const double lse = block_lse(row, vocab, max, s);
  const size_t top = static_cast<size_t>(blockIdx.x) * out.width;
  uint64_t below = ~uint64_t{0};
  for (int j = 0; j < task.k && j < vocab; ++j) {
    below = block_next_key(row, vocab, below, s);
    if (threadIdx.x == 0) {
      const int32_t id = radix_sampling::key_id(below);
      out.top_ids[top + j] = id;
      out.top_logprobs[top + j] = static_cast<float>(static_cast<double>(row[id]) - lse);
    }
  }
  if (threadIdx.x == 0) {
    for (int j = task.k < vocab ? task.k : vocab; j < out.width; ++j) {
      out.top_ids[top + j] = -1;
      out.top_logprobs[top + j] = -INFINITY;
    }
    const int32_t target = task.target >= 0 ? task.target : token_ids[task.logits_row];
    out.target_logprob[blockIdx.x] = static_cast<float>(static_cast<double>(row[target]) - lse);
  }
}

}  // namespace cbatch::device_logprobs
