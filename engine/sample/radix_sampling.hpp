// The sampler's decisions for one row (engine/sample/sampler.cpp: temperature -> top-k -> top-p -> min-p -> one
// inverse-CDF draw in id order) restated as searches over 64-bit sort keys, so that one GPU block can make
// them without sorting or copying the logits: the top-k cut and the top-p nucleus are each a radix descent,
// 8 bits a level, over histograms of counts or weights; min-p and the draw are a per-token test and one
// prefix sum in id order. sample_row() is the control flow, shared by the CUDA kernel (cuda/sampling/sample_rows.cuh,
// block-parallel primitives) and HostRowOps (sequential primitives: the reference the kernel is tested
// against). Its tokens equal Sampler's except where a sum's rounding order moves a boundary (~1e-14).
#pragma once
#include <math.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/base/host_device.hpp"

namespace cbatch {

// One sampling row's parameters as the engine sends them to a backend that draws on its device.
struct RowSampling {
  float temperature = 0.0f;  // < 1e-5: greedy
  float top_p = 1.0f;        // in (0, 1]
  float min_p = 0.0f;        // in [0, 1]
  int32_t top_k = -1;        // <= 0 or >= vocab: off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t penalty_begin = 0;  // the row's PenaltyTokens: [penalty_begin, penalty_end) of the step's list
  int32_t penalty_end = 0;
  int32_t mask_offset = -1;  // constrained rows: the first of its StepRequest::token_mask words; -1: none
  double uniform = 0.0;      // the draw's u in [0, 1): sample_uniform(request seed, output token index)
};

// A token that occurs in a penalized row's sequence (prompt or output), and how often in the output.
struct PenaltyToken {
  int32_t id;
  int32_t output_count;
};

// The logit of a token that occurs in the sequence, after vLLM's penalties: repetition (prompt and
// output), then frequency and presence (output). The host Sampler and the device apply exactly this.
CBATCH_HOST_DEVICE inline float penalized_logit(float logit, int32_t output_count, float repetition, float frequency,
                                                 float presence) {
  if (repetition != 1.0f) logit = logit > 0 ? logit / repetition : logit * repetition;
  if (output_count > 0) logit -= frequency * static_cast<float>(output_count) + presence;
  return logit;
}

// Applies a row's penalties to its logits (vocab) in place; ids out of range are ignored.
inline void apply_penalty_tokens(float* logits, int vocab, const RowSampling& p, const PenaltyToken* tokens) {
  for (int32_t e = p.penalty_begin; e < p.penalty_end; ++e) {
    const PenaltyToken t = tokens[e];
    if (t.id >= 0 && t.id < vocab) {
      logits[t.id] = penalized_logit(logits[t.id], t.output_count, p.repetition_penalty, p.frequency_penalty,
                                     p.presence_penalty);
    }
  }
}

namespace radix_sampling {

constexpr int kDigitBits = 8;
constexpr int kBuckets = 1 << kDigitBits;
constexpr int kTopShift = 64 - kDigitBits;  // the first level's digit

// Floats as unsigned integers in the same order; NaN below everything (-inf included); -0 as 0 (they tie).
CBATCH_HOST_DEVICE inline uint32_t ordered_bits(float logit) {
  if (logit != logit) return 0;
  if (logit == 0.0f) logit = 0.0f;
  uint32_t b;
  memcpy(&b, &logit, sizeof b);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

CBATCH_HOST_DEVICE inline float logit_of_bits(uint32_t ordered) {
  const uint32_t b = (ordered & 0x80000000u) != 0 ? (ordered & 0x7FFFFFFFu) : ~ordered;
  float logit;
  memcpy(&logit, &b, sizeof logit);
  return logit;
}

// Larger key = earlier in the sampler's (logit desc, id asc) order; every token's key is distinct.
CBATCH_HOST_DEVICE inline uint64_t sort_key(float logit, int32_t id) {
  return (static_cast<uint64_t>(ordered_bits(logit)) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}
CBATCH_HOST_DEVICE inline int32_t key_id(uint64_t key) {
  return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}
CBATCH_HOST_DEVICE inline float key_logit(uint64_t key) { return logit_of_bits(static_cast<uint32_t>(key >> 32)); }

// Which tokens stay in the draw, and their weights.
struct Filter {
  float top_logit = 0.0f;        // the largest logit (finite)
  double inv_temperature = 1.0;  // 1 / T, as the sampler computes it
  double min_p = 0.0;
  uint64_t min_key = 0;          // tokens with a smaller key were cut (by top-k, then top-p)

  // exp((logit - top) / T) in double, the sampler's weight (the top token's is exactly 1).
  CBATCH_HOST_DEVICE double weight(float logit) const {
    return exp((static_cast<double>(logit) - top_logit) * inv_temperature);
  }
  // A token still in the running before min-p: not NaN, and not cut.
  CBATCH_HOST_DEVICE bool is_candidate(float logit, uint64_t key) const { return logit == logit && key >= min_key; }
  // The token stays in the draw: a candidate whose weight reaches min_p; `w` receives the weight.
  CBATCH_HOST_DEVICE bool keeps(float logit, int32_t id, double& w) const {
    if (!is_candidate(logit, sort_key(logit, id))) return false;
    w = weight(logit);
    return w >= min_p;
  }
};

// Keys that share the digits above `shift` with `prefix` (every key at the first level).
CBATCH_HOST_DEVICE inline bool in_level(uint64_t key, int shift, uint64_t prefix) {
  return shift == kTopShift || (key >> (shift + kDigitBits)) == (prefix >> (shift + kDigitBits));
}
CBATCH_HOST_DEVICE inline int digit_of(uint64_t key, int shift) {
  return static_cast<int>((key >> shift) & (kBuckets - 1));
}

// One level's histogram of the candidates in the level: token count and total weight per digit.
struct Histogram {
  const int32_t* count;   // (kBuckets)
  const double* weight;   // (kBuckets), filled only when asked for weights
};

// The digit at which the measure (count, or weight) of the keys above it first reaches `target`, walking
// from the largest digit; `above` gains the measure of the digits passed. Rounding can leave the target
// just out of reach: then the smallest non-empty digit (everything in the level is taken).
CBATCH_HOST_DEVICE inline int pick_digit(const Histogram& h, bool by_weight, double target, double& above) {
  int lowest = 0;
  while (lowest < kBuckets - 1 && h.count[lowest] == 0) ++lowest;
  for (int d = kBuckets - 1; d > lowest; --d) {
    if (h.count[d] == 0) continue;
    const double measure = by_weight ? h.weight[d] : static_cast<double>(h.count[d]);
    if (above + measure >= target) return d;
    above += measure;
  }
  return lowest;
}

// The key of the candidate at which the measure of the candidates with keys >= it first reaches the target:
// `target` tokens (by count), or the fraction `target` of the candidates' total weight. Stops as soon as a
// level's chosen digit holds one candidate: the key's lower bits are then zero, which cuts the same
// candidates (raised to f.min_key, so that tokens cut before stay cut).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Ops>
CBATCH_HOST_DEVICE uint64_t descend(Ops& ops, const Filter& f, bool by_weight, double target) {
  uint64_t prefix = 0;
  double above = 0.0;
  for (int shift = kTopShift; shift >= 0; shift -= kDigitBits) {
    const Histogram h = ops.histogram(f, shift, prefix, by_weight);
    if (by_weight && shift == kTopShift) {
      double total = 0.0;
      for (int d = 0; d < kBuckets; ++d) total += h.weight[d];
      target *= total;
    }
    const int digit = pick_digit(h, by_weight, target, above);
    prefix |= static_cast<uint64_t>(digit) << shift;
    if (h.count[digit] <= 1) break;
  }
  return prefix > f.min_key ? prefix : f.min_key;
}

// The next token of one row. Ops (one row of logits):
//   uint64_t max_key()                               the largest sort key (the argmax token's)
//   Histogram histogram(const Filter&, int shift, uint64_t prefix, bool by_weight)
//                                                    the candidates in_level(key, shift, prefix) by digit
//   int32_t draw(const Filter&, double uniform)      the first kept id (in id order) whose cumulative weight
//                                                    exceeds uniform x the kept total; else the last kept id
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Ops>
CBATCH_HOST_DEVICE int32_t sample_row(Ops& ops, const RowSampling& p, int vocab) {
  const uint64_t top = ops.max_key();
  const float top_logit = key_logit(top);
  // Greedy, or a row with no finite top logit (weights would be NaN): the argmax, as the argmax kernel.
  if (p.temperature < 1e-5f || !(top_logit > -INFINITY && top_logit < INFINITY)) return key_id(top);
  Filter f;
  f.top_logit = top_logit;
  f.inv_temperature = 1.0 / static_cast<double>(p.temperature);
  f.min_p = p.min_p;
  if (p.top_k > 0 && p.top_k < vocab) f.min_key = descend(ops, f, false, static_cast<double>(p.top_k));
  if (p.top_p < 1.0f) f.min_key = descend(ops, f, true, static_cast<double>(p.top_p));
  return ops.draw(f, p.uniform);
}

// Sequential primitives over one row: the reference of the kernel's block-parallel ones.
class HostRowOps {
 public:
  HostRowOps(const float* logits, int vocab) : logits_(logits), vocab_(vocab) {}

  uint64_t max_key() const {
    uint64_t best = 0;
    for (int32_t id = 0; id < vocab_; ++id) best = std::max(best, sort_key(logits_[id], id));
    return best;
  }

  Histogram histogram(const Filter& f, int shift, uint64_t prefix, bool by_weight) {
    for (int d = 0; d < kBuckets; ++d) count_[d] = 0, weight_[d] = 0.0;
    for (int32_t id = 0; id < vocab_; ++id) {
      const uint64_t key = sort_key(logits_[id], id);
      if (!f.is_candidate(logits_[id], key) || !in_level(key, shift, prefix)) continue;
      ++count_[digit_of(key, shift)];
      if (by_weight) weight_[digit_of(key, shift)] += f.weight(logits_[id]);
    }
    return {count_, weight_};
  }

  int32_t draw(const Filter& f, double uniform) const {
    double total = 0.0, w = 0.0;
    int32_t last = -1;
    for (int32_t id = 0; id < vocab_; ++id) {
      if (f.keeps(logits_[id], id, w)) total += w, last = id;
    }
    const double target = uniform * total;
    double cumulative = 0.0;
    for (int32_t id = 0; id < vocab_; ++id) {
      if (f.keeps(logits_[id], id, w) && target < (cumulative += w)) return id;
    }
    return last;
  }

 private:
  const float* logits_;  // (vocab)
  int vocab_;
  int32_t count_[kBuckets];
  double weight_[kBuckets];
};

}  // namespace radix_sampling
}  // namespace cbatch
