// The device sampler's algorithm (engine/sample/radix_sampling.hpp) run with its sequential primitives against the
// Sampler: the same token for every draw, over the sampler tests' logits and parameters, greedy rows,
// vocabularies from 1 token to Llama 3's, rows with NaN, -inf and +inf logits, and penalties.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/cpu/cpu_ops.hpp"
#include "engine/sample/radix_sampling.hpp"
#include "engine/sample/sampler.hpp"
#include "tests/engine/sampling_cases.hpp"

namespace cbatch::test {

namespace {

int32_t radix_sample(const std::vector<float>& logits, const RowSampling& row) {
  radix_sampling::HostRowOps ops(logits.data(), static_cast<int>(logits.size()));
  return radix_sampling::sample_row(ops, row, static_cast<int>(logits.size()));
}

}  // namespace

TEST_CASE("radix sampling: the sampler's token for every filter and draw") {
  std::mt19937 rng(11);
  Sampler sampler;
  int checked = 0, filtered = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int vocab = trial == 7 ? 128256 : std::uniform_int_distribution<int>(1, trial % 10 == 0 ? 5000 : 300)(rng);
    const std::vector<float> logits = random_logits(vocab, trial % 4, rng);
    SamplingParams p = random_sampling_params(trial, vocab, rng);
    if (trial % 13 == 0) p.temperature = 0.0f;  // greedy
    const uint64_t seed = rng();
    CAPTURE(trial);
    CAPTURE(vocab);
    std::vector<int32_t> tokens = {1};
    for (int draw = 0; draw < 10; ++draw) {
      std::vector<float> row = logits;
      const int32_t want = sampler.sample(row.data(), vocab, p, tokens, 1, seed);
      REQUIRE(radix_sample(logits, row_sampling(p, seed, draw)) == want);
      tokens.push_back(want);
      ++checked;
    }
    filtered += p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f;
  }
  CHECK(checked == 4000);
  CHECK(filtered > 250);
}

TEST_CASE("radix sampling: penalties from the sequence's distinct tokens give the sampler's token") {
  std::mt19937 rng(29);
  Sampler sampler;
  std::vector<int32_t> slot;
  for (int trial = 0; trial < 200; ++trial) {
    const int vocab = std::uniform_int_distribution<int>(2, 400)(rng);
    const std::vector<float> logits = random_logits(vocab, trial % 4, rng);
    SamplingParams p = random_sampling_params(trial, vocab, rng);
    if (trial % 5 == 0) p.temperature = 0.0f;  // greedy with penalties: the argmax of the penalized logits
    p.repetition_penalty = trial % 3 == 0 ? 1.0f : std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
    p.frequency_penalty = trial % 4 == 1 ? 0.0f : std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    p.presence_penalty = trial % 4 == 2 ? 0.0f : std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    std::vector<int32_t> tokens;  // prompt and output with repeats, and one id outside the vocabulary
    const int num_prompt = std::uniform_int_distribution<int>(0, 30)(rng);
    for (int i = num_prompt + std::uniform_int_distribution<int>(0, 30)(rng); i > 0; --i) {
      tokens.push_back(std::uniform_int_distribution<int32_t>(0, std::min(vocab, 40) - 1)(rng));
    }
    if (trial % 9 == 0) tokens.push_back(vocab + 3);
    CAPTURE(trial);
    const uint64_t seed = rng();
    std::vector<float> row = logits;
    const int32_t want = sampler.sample(row.data(), vocab, p, tokens, num_prompt, seed);

    std::vector<PenaltyToken> penalty_tokens = {{-1, -1}};  // the row's range need not start at 0
    RowSampling sampling = row_sampling(p, seed, static_cast<int64_t>(tokens.size()) - num_prompt);
    sampling.penalty_begin = 1;
    append_penalty_tokens(tokens, num_prompt, vocab, penalty_tokens, slot);
    sampling.penalty_end = static_cast<int32_t>(penalty_tokens.size());
    CHECK(std::count(slot.begin(), slot.end(), -1) == vocab);  // the scratch is clean again
    std::vector<float> penalized = logits;
    apply_penalty_tokens(penalized.data(), vocab, sampling, penalty_tokens.data());
    CHECK(radix_sample(penalized, sampling) == want);
  }
}

TEST_CASE("radix sampling: sort keys order (logit desc, id asc), NaN last") {
  using radix_sampling::sort_key;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> ascending = {-inf, -3e38f, -1.0f, -1e-30f, 0.0f, 1e-30f, 1.0f, 3e38f, inf};
  for (size_t i = 0; i + 1 < ascending.size(); ++i) {
    CAPTURE(i);
    CHECK(sort_key(ascending[i], 5) < sort_key(ascending[i + 1], 5));
    CHECK(radix_sampling::key_logit(sort_key(ascending[i], 9)) == ascending[i]);
    CHECK(radix_sampling::key_id(sort_key(ascending[i], 9)) == 9);
  }
  CHECK(sort_key(1.0f, 3) > sort_key(1.0f, 4));    // ties: the lower id first
  CHECK(sort_key(-0.0f, 3) > sort_key(0.0f, 4));   // -0 ties with 0
  CHECK(sort_key(nan, 0) < sort_key(-inf, 100000));
  CHECK(sort_key(-nan, 0) < sort_key(-inf, 100000));
}

TEST_CASE("radix sampling: NaN is never drawn; rows without a finite top give the argmax") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  RowSampling row;
  row.temperature = 1.0f;
  std::vector<float> logits = {nan, 0.0f, nan, 0.0f, nan};
  for (double u : {0.0, 0.3, 0.6, 0.999999}) {
    row.uniform = u;
    const int32_t id = radix_sample(logits, row);
    CHECK((id == 1 || id == 3));
  }
  CHECK(radix_sample({nan, nan, nan}, row) == 0);
  CHECK(radix_sample({-inf, -inf, -inf}, row) == 0);
  CHECK(radix_sample({1.0f, inf, 2.0f, inf}, row) == 1);
  row.temperature = 0.0f;
  CHECK(radix_sample({1.0f, nan, 2.0f, 2.0f}, row) == 2);
}

}  // namespace cbatch::test
