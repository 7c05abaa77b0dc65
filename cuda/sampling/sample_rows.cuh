// The device sampler's block code (launched by sample_rows.cu): one block of 256 threads per row runs
// radix_sampling::sample_row with block-parallel primitives. A histogram level: each warp walks 32
// consecutive tokens at a time, groups the lanes of one digit with __match_any_sync, and the group's first
// lane adds the group's count and weight (summed over the group in lane order) to the warp's own histogram
// in shared memory; then thread b adds bucket b over the warps in order. No atomics: every sum has a fixed
// order, so a row's draw is the same on every run. The draw: warp w sums the kept weights of its
// contiguous share of the ids; the warp whose range holds u x total walks its share again with warp
// prefix sums until the cumulative weight passes it. Includes no CUDA header and uses only threadIdx,
// blockIdx, __syncthreads and warp intrinsics, so that the host tests can run it through a block emulator
// (tests/cuda/block_emulator.hpp) where there is no GPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/sample/radix_sampling.hpp"
#include "engine/sample/token_mask.hpp"

namespace cbatch::device_sampling {

using radix_sampling::Filter;
using radix_sampling::Histogram;
using radix_sampling::kBuckets;

constexpr int kSampleThreads = kBuckets;  // thread b merges bucket b
constexpr int kSampleWarps = kSampleThreads / 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;

struct SampleShared {
  int32_t count[kSampleWarps][kBuckets];  // each warp's histogram
  double weight[kSampleWarps][kBuckets];
  int32_t merged_count[kBuckets];         // the block's
  double merged_weight[kBuckets];
  uint64_t warp_key[kSampleWarps];
  double warp_sum[kSampleWarps];          // the draw: kept weight of each warp's ids
  int32_t warp_last[kSampleWarps];        // and its last kept id (-1: none)
  int32_t drawn;                          // the drawn id, -1 until found
};

class BlockRowOps {
 public:
  __device__ BlockRowOps(const float* row, int vocab, SampleShared& s) : row_(row), vocab_(vocab), s_(s) {}

  __device__ uint64_t max_key() {
    uint64_t best = 0;
    for (int i = threadIdx.x; i < vocab_; i += kSampleThreads) best = max(best, radix_sampling::sort_key(row_[i], i));
    for (int offset = 16; offset > 0; offset >>= 1) best = max(best, __shfl_xor_sync(kFullMask, best, offset));
    if (lane() == 0) s_.warp_key[warp()] = best;
    __syncthreads();
    best = s_.warp_key[0];
    for (int w = 1; w < kSampleWarps; ++w) best = max(best, s_.warp_key[w]);
    __syncthreads();  // warp_key is free again
    return best;
  }

  __device__ Histogram histogram(const Filter& f, int shift, uint64_t prefix, bool by_weight) {
    for (int b = lane(); b < kBuckets; b += 32) {
      s_.count[warp()][b] = 0;
      s_.weight[warp()][b] = 0.0;
    }
    __syncwarp();
    const int padded = (vocab_ + kSampleThreads - 1) / kSampleThreads * kSampleThreads;  // whole warps loop
    for (int i = threadIdx.x; i < padded; i += kSampleThreads) {
      bool in = false;
      int digit = kBuckets;  // lanes out of the level share a digit no bucket has
      double w = 0.0;
      if (i < vocab_) {
        const float logit = row_[i];
        const uint64_t key = radix_sampling::sort_key(logit, i);
        in = f.is_candidate(logit, key) && radix_sampling::in_level(key, shift, prefix);
        if (in) {
          digit = radix_sampling::digit_of(key, shift);
          if (by_weight) w = f.weight(logit);
        }
      }
      if (__ballot_sync(kFullMask, in) == 0) continue;
      const unsigned peers = __match_any_sync(kFullMask, digit);
      double sum = 0.0;
      if (by_weight) {
        for (int src = 0; src < 32; ++src) {
          const double v = __shfl_sync(kFullMask, w, src);
          if ((peers >> src) & 1u) sum += v;
        }
      }
      if (in && lane() == __ffs(peers) - 1) {  // distinct digits have distinct first lanes
        s_.count[warp()][digit] += __popc(peers);
        s_.weight[warp()][digit] += sum;
      }
      __syncwarp();  // the next group's first lane may add to the same bucket
    }
    __syncthreads();
    int32_t count = 0;
    double weight = 0.0;
    for (int w = 0; w < kSampleWarps; ++w) {
      count += s_.count[w][threadIdx.x];
      weight += s_.weight[w][threadIdx.x];
    }
    s_.merged_count[threadIdx.x] = count;
    s_.merged_weight[threadIdx.x] = weight;
    __syncthreads();
    return {s_.merged_count, s_.merged_weight};
  }

  __device__ int32_t draw(const Filter& f, double uniform) {
    const int share = ((vocab_ + kSampleWarps - 1) / kSampleWarps + 31) / 32 * 32;  // ids per warp, whole rounds
    const int begin = warp() * share;
    const int end = min(vocab_, begin + share);
    double sum = 0.0;
    int32_t last = -1;
    for (int i = begin + lane(); i < end; i += 32) {
      double w;
      if (f.keeps(row_[i], i, w)) sum += w, last = i;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum += __shfl_xor_sync(kFullMask, sum, offset);
      last = max(last, __shfl_xor_sync(kFullMask, last, offset));
    }
    if (lane() == 0) {
      s_.warp_sum[warp()] = sum;
      s_.warp_last[warp()] = last;
    }
    if (threadIdx.x == 0) s_.drawn = -1;
    __syncthreads();
    double total = 0.0, before = 0.0;
    int32_t last_kept = -1;
    for (int w = 0; w < kSampleWarps; ++w) {
      if (w == warp()) before = total;
      total += s_.warp_sum[w];
      last_kept = max(last_kept, s_.warp_last[w]);
    }
    const double target = uniform * total;
    if (before <= target && target < before + s_.warp_sum[warp()]) walk(f, begin, end, before, target);
    __syncthreads();
    return s_.drawn >= 0 ? s_.drawn : last_kept;  // none: u x total rounded up to the total
  }

 private:
  __device__ int lane() const { return threadIdx.x % 32; }
  __device__ int warp() const { return threadIdx.x / 32; }

  // The first kept id in [begin, end) at which `cumulative` (from `before`) passes the target, if any.
  __device__ void walk(const Filter& f, int begin, int end, double cumulative, double target) {
    for (int base = begin; base < end; base += 32) {
      const int i = base + lane();
      double w = 0.0;
      const bool kept = i < end && f.keeps(row_[i], i, w);
      double scan = kept ? w : 0.0;  // inclusive prefix sum over the lanes
      for (int offset = 1; offset < 32; offset <<= 1) {
        const double other = __shfl_up_sync(kFullMask, scan, offset);
        if (lane() >= offset) scan += other;
      }
      const unsigned hit = __ballot_sync(kFullMask, kept && target < cumulative + scan);
      if (hit != 0) {
        if (lane() == 0) s_.drawn = base + __ffs(hit) - 1;
        return;
      }
      cumulative += __shfl_sync(kFullMask, scan, 31);
    }
  }

  const float* row_;  // (vocab)
  int vocab_;
  SampleShared& s_;
};

// One block's row: out[blockIdx.x] = the token of logits row blockIdx.x under params[blockIdx.x], after
// the row's constraint mask (-inf where its bit is clear) and then its penalties, both applied to the
// logits in place (each listed token once, so no two threads write one logit between barriers).
__device__ inline void sample_block_row(int32_t* out,                        // (num_rows)
                                        float* logits,                       // (num_rows, vocab)
                                        const RowSampling* params,           // (num_rows)
                                        const PenaltyToken* penalty_tokens,  // (rows' penalty ranges)
                                        const uint64_t* token_mask,          // (masked rows' words)
                                        int vocab) {
  __shared__ SampleShared shared;
  float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  const RowSampling p = params[blockIdx.x];
  if (p.mask_offset >= 0) {
    const uint64_t* words = token_mask + p.mask_offset;
    for (int i = threadIdx.x; i < vocab; i += kSampleThreads) {
      if (!token_allowed(words, i)) row[i] = -INFINITY;
    }
    __syncthreads();  // a penalty below may write a logit another thread masked
  }
  for (int e = p.penalty_begin + static_cast<int>(threadIdx.x); e < p.penalty_end; e += kSampleThreads) {
    const PenaltyToken t = penalty_tokens[e];
    if (t.id >= 0 && t.id < vocab) {
      row[t.id] = penalized_logit(row[t.id], t.output_count, p.repetition_penalty, p.frequency_penalty,
                                  p.presence_penalty);
    }
  }
  __syncthreads();  // the block's writes to the row are visible to all its threads
  BlockRowOps ops(row, vocab, shared);
  const int32_t id = radix_sampling::sample_row(ops, p, vocab);
  if (threadIdx.x == 0) out[blockIdx.x] = id;
}

}  // namespace cbatch::device_sampling
