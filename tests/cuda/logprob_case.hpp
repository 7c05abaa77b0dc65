// A batch of logprob tasks for the device log-softmax and top-k (cuda/sampling/logprob_rows.cuh) and the host's
// answers (engine/sample/logprobs.hpp): random rows with ties, -inf and NaN logits mixed in, k from 0 to
// above the vocabulary, targets given or taken from token_ids. Shared by the emulated and the GPU test.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/sampling/logprob_tasks.hpp"
#include "engine/sample/logprobs.hpp"

namespace cbatch::test {

struct LogprobCase {
  int vocab = 0, width = 0;
  std::vector<float> logits;                         // (rows, vocab)
  std::vector<int32_t> token_ids;                    // (rows)
  std::vector<device_logprobs::LogprobTask> tasks;   // (tasks)
  std::vector<float> want_target;                    // (tasks)
  std::vector<int32_t> want_ids;                     // (tasks, width)
  std::vector<float> want_lps;                       // (tasks, width)
};

inline LogprobCase make_logprob_case(int vocab, int rows, std::mt19937& rng) {
  LogprobCase c;
  c.vocab = vocab;
  c.width = vocab + 3;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < vocab; ++i) {
      float x = normal(rng);
      if (r % 3 == 1) x = std::round(x);                 // many ties
      if (r % 5 == 2 && i % 7 == 3) x = -INFINITY;
      if (r % 11 == 4 && i % 13 == 5) x = NAN;
      c.logits.push_back(x);
    }
    int32_t chosen = token(rng);
    while (std::isnan(c.logits[static_cast<size_t>(r) * vocab + chosen])) chosen = (chosen + 1) % vocab;
    c.token_ids.push_back(chosen);
  }
  for (int t = 0; t < 2 * rows; ++t) {
    const int k = t % 4 == 3 ? vocab + 3 : t % 6;
    c.tasks.push_back({t % rows, k, t % 2 == 0 ? -1 : token(rng)});
  }
  c.want_target.resize(c.tasks.size());
  c.want_ids.assign(c.tasks.size() * c.width, -1);
  c.want_lps.assign(c.tasks.size() * c.width, -INFINITY);
  for (size_t t = 0; t < c.tasks.size(); ++t) {
    const auto& task = c.tasks[t];
    const int32_t target = task.target >= 0 ? task.target : c.token_ids[task.logits_row];
    c.want_target[t] = reduce_logprob_row(&c.logits[static_cast<size_t>(task.logits_row) * vocab], vocab, task.k, target,
                                          &c.want_ids[t * c.width], &c.want_lps[t * c.width]);
  }
  return c;
}

// Device and host sum e^x differently (double exp vs a float polynomial): values agree to ~1e-6.
inline bool close_logprob(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= 1e-5f;
}

}  // namespace cbatch::test
