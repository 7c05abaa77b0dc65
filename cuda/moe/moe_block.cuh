// The block code of the mixture-of-experts kernels (moe.cu, whose header describes them): routing, the
// permutation of (row, k) picks by expert, the gather of rows into expert segments, and the un-permute with
// the weighted sum. It uses no CUDA header of its own: include it after cuda_dtype.cuh, or on the host after
// tests/cuda/block_emulator.hpp and then cuda_dtype.cuh (tests/cuda/test_moe_emulated.cpp).
// A pick is row * top_k + k; the permuted order lists expert 0's picks, then expert 1's, ..., each expert's
// in pick order (so in row order), exactly engine/cpu/cpu_moe.cpp's group_by_expert.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace cbatch::moe_detail {

constexpr int kMaxExperts = 512;        // the routing bitmask and the permutation's per-expert totals
constexpr int kPermuteCounters = 8192;  // the permutation's (warp, expert) counters in shared memory (32 KB)
constexpr int kRouteThreads = 128;    // one thread a row
// The permutation's one block: a warp a contiguous range of picks, as many warps (up to 32) as the counters
// hold one per expert for: 32 up to 256 experts, 16 for 512.
constexpr int kPermuteMaxThreads = 1024;
constexpr int permute_threads(int num_experts) {
  return 32 * (kPermuteCounters / num_experts < kPermuteMaxThreads / 32 ? kPermuteCounters / num_experts
                                                                          : kPermuteMaxThreads / 32);
}
static_assert(permute_threads(kMaxExperts) >= 32, "the counters must hold one warp's per expert");
constexpr int kRowThreads = 256;      // gather and combine: one block a row

struct RouteRule {
  int num_experts = 0;
  int top_k = 0;
  bool renormalize = false;        // softmax-then-top-k: the k probabilities divided by their sum
  bool topk_then_softmax = false;  // gpt-oss: the top k logits, then a softmax over those k
  float logit_scale = 1.0f;              // every logit times it first (Gemma 4's router: hidden^-1/2)
  const float* expert_scale = nullptr;   // (num_experts) or null: each pick's weight times its expert's (Gemma 4)
};

// One row's routing, the decisions of cpu_moe.cpp's route_row: the top_k experts by logit (times the rule's
// logit scale, + bias), highest
// first, a tie going to the lower id (strict >), then their weights under the rule. Sums run in expert
// order (softmax over all) or in k order (over the k picked), as the CPU sums them.
__device__ __forceinline__ void route_one_row(const float* __restrict__ logits,  // (num_experts)
                                              const float* __restrict__ bias,    // (num_experts) or null
                                              const RouteRule& rule,
                                              int32_t* __restrict__ experts,     // (top_k)
                                              float* __restrict__ weights) {     // (top_k)
  auto logit = [&](int e) {
    const float l = logits[e] * rule.logit_scale;
    return bias != nullptr ? l + bias[e] : l;
  };
  uint32_t taken[kMaxExperts / 32] = {};
  for (int k = 0; k < rule.top_k; ++k) {
    int best = -1;
    float best_logit = 0.0f;
    for (int e = 0; e < rule.num_experts; ++e) {
      if ((taken[e / 32] >> (e % 32)) & 1u) continue;
      const float l = logit(e);
      if (best < 0 || l > best_logit) best = e, best_logit = l;
    }
    taken[best / 32] |= 1u << (best % 32);
    experts[k] = best;
    weights[k] = best_logit;  // the logit for now
  }
  if (rule.topk_then_softmax) {  // weights[0] holds the largest logit
    const float max_logit = weights[0];
    float sum = 0.0f;
    for (int k = 0; k < rule.top_k; ++k) sum += (weights[k] = expf(weights[k] - max_logit));
    for (int k = 0; k < rule.top_k; ++k) weights[k] /= sum;
    return;
  }
  float max_logit = logit(0);
  for (int e = 1; e < rule.num_experts; ++e) max_logit = fmaxf(max_logit, logit(e));
  float sum = 0.0f;
  for (int e = 0; e < rule.num_experts; ++e) sum += expf(logit(e) - max_logit);
  for (int k = 0; k < rule.top_k; ++k) weights[k] = expf(weights[k] - max_logit) / sum;
  if (!rule.renormalize) return;
  float picked = 0.0f;
  for (int k = 0; k < rule.top_k; ++k) picked += weights[k];
  for (int k = 0; k < rule.top_k; ++k) weights[k] /= picked;
}

__device__ __forceinline__ void moe_route_block(const float* __restrict__ logits,  // (num_rows, num_experts)
                                                const float* __restrict__ bias,    // (num_experts) or null
                                                RouteRule rule, int num_rows,
                                                int32_t* __restrict__ experts,     // (num_rows, top_k)
                                                float* __restrict__ weights) {     // (num_rows, top_k)
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= num_rows) return;
  const size_t k0 = static_cast<size_t>(row) * rule.top_k;
  route_one_row(logits + static_cast<size_t>(row) * rule.num_experts, bias, rule, experts + k0, weights + k0);
  if (rule.expert_scale == nullptr) return;
  for (int k = 0; k < rule.top_k; ++k) weights[k0 + k] *= rule.expert_scale[experts[k0 + k]];
}

// The counting sort of the picks by expert, in one block of permute_threads(num_experts): warp w owns the w-th
// of num_warps contiguous ranges of picks and walks it 32 picks at a time; __match_any_sync finds each pick's peers (same
// expert) in the chunk, and its rank among the lower lanes gives its place, so the order within an expert
// is the pick order. Pass 1 counts per (warp, expert); the counts become each warp's first slot per expert;
// pass 2 places. Outputs: offsets (num_experts + 1); entries[slot] = pick; pick_slot[pick] = slot;
// slot_expert[slot] = the expert.
__device__ __forceinline__ void moe_permute_block(const int32_t* __restrict__ experts,  // (num_picks)
                                                  int num_picks, int num_experts,
                                                  int32_t* __restrict__ offsets,      // (num_experts + 1)
                                                  int32_t* __restrict__ entries,      // (num_picks)
                                                  int32_t* __restrict__ pick_slot,    // (num_picks)
                                                  int32_t* __restrict__ slot_expert) {  // (num_picks)
  __shared__ int32_t counters[kPermuteCounters];  // (num_warps, num_experts): a count, then the next slot
  const int num_warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned lower_lanes = (1u << lane) - 1u;
  auto cursor = [&](int w, int e) -> int32_t& { return counters[w * num_experts + e]; };
  for (int i = threadIdx.x; i < num_warps * num_experts; i += blockDim.x) counters[i] = 0;
  __syncthreads();
  const int span = (num_picks + num_warps - 1) / num_warps;
  const int begin = min(warp * span, num_picks), end = min(begin + span, num_picks);
  for (int base = begin; base < end; base += 32) {  // pass 1: count
    const int i = base + lane;
    const int e = i < end ? experts[i] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && (peers & lower_lanes) == 0) cursor(warp, e) += __popc(peers);  // the group's lowest lane
    __syncwarp();
  }
  __syncthreads();
  __shared__ int32_t expert_total[kMaxExperts];
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {  // per expert: the warps' counts, scanned
    int32_t running = 0;
    for (int w = 0; w < num_warps; ++w) {
      const int32_t c = cursor(w, e);
      cursor(w, e) = running;
      running += c;
    }
    expert_total[e] = running;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // at most kMaxExperts additions
    int32_t start = 0;
    for (int e = 0; e < num_experts; ++e) {
      const int32_t n = expert_total[e];
      offsets[e] = start;
      expert_total[e] = start;
      start += n;
    }
    offsets[num_experts] = start;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < num_warps * num_experts; i += blockDim.x) counters[i] += expert_total[i % num_experts];
  __syncthreads();
  for (int base = begin; base < end; base += 32) {  // pass 2: place
    const int i = base + lane;
    const int e = i < end ? experts[i] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int slot = e >= 0 ? cursor(warp, e) + __popc(peers & lower_lanes) : 0;
    __syncwarp();  // every lane has read its cursor before the leader moves it
    if (e >= 0) {
      entries[slot] = i;
      pick_slot[i] = slot;
      slot_expert[slot] = e;
      if ((peers & lower_lanes) == 0) cursor(warp, e) += __popc(peers);
    }
    __syncwarp();
  }
}

// Block `slot` (one a permuted row) copies row entries[slot] / top_k of h to rows[slot].
template <typename T>
__device__ __forceinline__ void moe_gather_block(T* __restrict__ rows,            // (num_picks, dim)
                                                 const T* __restrict__ h,         // (num_rows, dim)
                                                 const int32_t* __restrict__ entries,  // (num_picks)
                                                 int top_k, int dim) {
  const int slot = blockIdx.x;
  const T* src = h + static_cast<size_t>(entries[slot] / top_k) * dim;
  T* dst = rows + static_cast<size_t>(slot) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

// The shared expert of Qwen2-MoE: its output (num_rows, dim) and its sigmoid gate, the dot of the layer's
// normed input h (num_rows, dim) with gate (dim). All null without one.
template <typename T>
struct SharedExpertOut {
  const T* out = nullptr;        // (num_rows, dim)
  const T* h = nullptr;          // (num_rows, dim)
  const float* gate = nullptr;   // (dim), or null: the shared expert unscaled (Granite's)
};

// Block `row`: out[row] = shared part (sigmoid(h . gate) * shared out, shared out without a gate, or 0) + sum
// over k in k order of weights[row, k] * (expert_out[pick_slot[row, k]] + down_bias[experts[row, k]]), in fp32,
// as moe_ffn sums.
template <typename T>
__device__ __forceinline__ void moe_combine_block(T* __restrict__ out,                    // (num_rows, dim)
                                                  const T* __restrict__ expert_out,       // (num_picks, dim)
                                                  const int32_t* __restrict__ pick_slot,  // (num_rows, top_k)
                                                  const int32_t* __restrict__ experts,    // (num_rows, top_k)
                                                  const float* __restrict__ weights,      // (num_rows, top_k)
                                                  const float* __restrict__ down_bias,    // (num_experts, dim) or null
                                                  SharedExpertOut<T> shared, int top_k, int dim) {
  const int row = blockIdx.x;
  const size_t k0 = static_cast<size_t>(row) * top_k;
  float gate = 1.0f;
  if (shared.out != nullptr && shared.gate != nullptr) {
    float dot = 0.0f;
    const T* hr = shared.h + static_cast<size_t>(row) * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dot += to_float(hr[i]) * shared.gate[i];
    gate = 1.0f / (1.0f + expf(-block_sum(dot)));
  }
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      float v = to_float(expert_out[static_cast<size_t>(pick_slot[k0 + k]) * dim + i]);
      if (down_bias != nullptr) v += down_bias[static_cast<size_t>(experts[k0 + k]) * dim + i];
      sum += weights[k0 + k] * v;
    }
    const float base = shared.out != nullptr ? to_float(shared.out[static_cast<size_t>(row) * dim + i]) * gate : 0.0f;
    out[static_cast<size_t>(row) * dim + i] = from_float<T>(base + sum);
  }
}

}  // namespace cbatch::moe_detail
