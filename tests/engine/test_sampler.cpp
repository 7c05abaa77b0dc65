// The sampler against a plain reference that sorts the whole vocabulary (top-k, top-p and min-p as
// prefixes of the (logit desc, id asc) order, then the inverse CDF over the kept tokens in id order):
// the same token for every draw, over peaked, flat, tied and masked logits and every filter. Also: greedy is the
// argmax, the draw depends only on (seed, token index), and the frequencies follow the softmax.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/sample/sampler.hpp"
#include "tests/engine/sampling_cases.hpp"

namespace cbatch::test {

namespace {

// The kept tokens of `logits` under `p`, in id order, with their weights exp((l - max) / T).
std::vector<std::pair<int32_t, double>> reference_kept(const std::vector<float>& logits, const SamplingParams& p) {
  const int vocab = static_cast<int>(logits.size());
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const int k = p.top_k > 0 ? std::min(p.top_k, vocab) : vocab;
  order.resize(static_cast<size_t>(k));
  const double max_logit = logits[order[0]];
  auto weight = [&](int32_t id) { return std::exp((static_cast<double>(logits[id]) - max_logit) / p.temperature); };
  std::vector<int32_t> by_id = order;
  std::sort(by_id.begin(), by_id.end());
  double sum = 0.0;  // over the candidates in id order, as the sampler adds them
  for (int32_t id : by_id) sum += weight(id);
  int keep = k;
  if (p.top_p < 1.0f) {
    double mass = 0.0;
    for (int i = 0; i < k; ++i) {
      mass += weight(order[i]) / sum;
      if (mass >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<std::pair<int32_t, double>> kept;
  for (int i = 0; i < keep; ++i) {
    if (p.min_p <= 0.0f || weight(order[i]) >= p.min_p) kept.emplace_back(order[i], weight(order[i]));
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

int32_t reference_sample(const std::vector<float>& logits, const SamplingParams& p, double u) {
  const auto kept = reference_kept(logits, p);
  double total = 0.0;
  for (const auto& [id, w] : kept) total += w;
  const double target = u * total;
  double cumulative = 0.0;
  for (const auto& [id, w] : kept) {
    cumulative += w;
    if (target < cumulative) return id;
  }
  return kept.back().first;
}

}  // namespace

TEST_CASE("sampler: the same token as the sorting reference for every filter and draw") {
  std::mt19937 rng(3);
  Sampler sampler;
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int vocab = std::uniform_int_distribution<int>(1, trial % 10 == 0 ? 5000 : 300)(rng);
    const std::vector<float> logits = random_logits(vocab, trial % 4, rng);
    const SamplingParams p = random_sampling_params(trial, vocab, rng);
    const uint64_t seed = rng();
    CAPTURE(trial);
    CAPTURE(vocab);
    std::vector<int32_t> tokens = {1};  // one prompt token; the draw index grows with the output
    for (int draw = 0; draw < 20; ++draw) {
      std::vector<float> row = logits;
      const int32_t got = sampler.sample(row.data(), vocab, p, tokens, 1, seed);
      const int32_t want = reference_sample(logits, p, sample_uniform(seed, draw));
      REQUIRE(got == want);
      tokens.push_back(got);
      ++checked;
    }
  }
  CHECK(checked == 6000);
}

TEST_CASE("sampler: greedy is the argmax; a draw depends only on the seed and the token index") {
  Sampler sampler;
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  CHECK(sampler.sample(logits.data(), 5, greedy, {7}, 1, 42) == 1);  // ties: the lower id

  SamplingParams p;  // vLLM defaults: temperature 1, no top-k / top-p / min-p
  std::vector<int32_t> tokens = {7, 1, 1};
  std::vector<float> a = logits, b = logits;
  const int32_t first = sampler.sample(a.data(), 5, p, tokens, 1, 42);
  Sampler other;  // another sampler (scratch state must not matter)
  CHECK(other.sample(b.data(), 5, p, tokens, 1, 42) == first);
}

TEST_CASE("sampler: frequencies follow the tempered softmax; filtered tokens never come") {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f, 3.0f, -2.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0.8f;
  std::vector<double> expected(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) total += expected[i] = std::exp(logits[i] / 0.8);
  Sampler sampler;
  const int draws = 20000;
  std::vector<int> counts(logits.size(), 0);
  std::vector<int32_t> tokens = {0};
  for (int d = 0; d < draws; ++d) {
    std::vector<float> row = logits;
    tokens.resize(1 + static_cast<size_t>(d));  // draw index d
    ++counts[static_cast<size_t>(sampler.sample(row.data(), 6, p, tokens, 1, 99))];
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    const double prob = expected[i] / total;
    const double sigma = std::sqrt(draws * prob * (1.0 - prob));
    CAPTURE(i);
    CHECK(std::fabs(counts[i] - draws * prob) < 5.0 * sigma + 1.0);
  }

  // top-k 2 keeps ids 3 and (of the tied 2.0s) 1; top-p 0.7 at T = 0.8 keeps id 3 (mass 0.595) and then
  // id 1 (0.766); min-p 0.5 keeps weights >= 0.5 (logit >= 3 + 0.8 ln 0.5 = 2.45): id 3 alone.
  for (auto [top_k, top_p, min_p, allowed] :
       {std::tuple{2, 1.0f, 0.0f, std::vector<int32_t>{1, 3}}, std::tuple{-1, 0.7f, 0.0f, std::vector<int32_t>{1, 3}},
        std::tuple{-1, 1.0f, 0.5f, std::vector<int32_t>{3}}}) {
    SamplingParams f = p;
    f.top_k = top_k;
    f.top_p = top_p;
    f.min_p = min_p;
    std::vector<int> seen(logits.size(), 0);
    for (int d = 0; d < 2000; ++d) {
      std::vector<float> row = logits;
      tokens.resize(1 + static_cast<size_t>(d));
      ++seen[static_cast<size_t>(sampler.sample(row.data(), 6, f, tokens, 1, 7))];
    }
    for (size_t i = 0; i < logits.size(); ++i) {
      const bool is_allowed = std::find(allowed.begin(), allowed.end(), static_cast<int32_t>(i)) != allowed.end();
      CAPTURE(f.top_k);  // (f's copies: older clang cannot capture structured bindings in CAPTURE's lambda)
      CAPTURE(f.top_p);
      CAPTURE(i);
      CHECK((seen[i] > 0) == is_allowed);
    }
  }
}

}  // namespace cbatch::test

TEST_CASE("sample_rng_seed: sample 0 is the request's own stream, sample i the stream of seed + i (or --seed + i)") {
  CHECK(cbatch::sample_rng_seed(std::optional<uint64_t>(5), 11, "\"q\"", 0) == cbatch::request_rng_seed(5, 11, "\"q\""));
  CHECK(cbatch::sample_rng_seed(std::optional<uint64_t>(5), 11, "\"q\"", 3) == cbatch::request_rng_seed(8, 11, "\"q\""));
  CHECK(cbatch::sample_rng_seed(std::nullopt, 11, "\"q\"", 0) == cbatch::request_rng_seed(std::nullopt, 11, "\"q\""));
  CHECK(cbatch::sample_rng_seed(std::nullopt, 11, "\"q\"", 2) == cbatch::request_rng_seed(std::nullopt, 13, "\"q\""));
  CHECK(cbatch::sample_rng_seed(std::nullopt, 11, "\"q\"", 1) != cbatch::sample_rng_seed(std::nullopt, 11, "\"q\"", 2));
}
