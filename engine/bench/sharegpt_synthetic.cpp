#include "engine/bench/sharegpt_synthetic.hpp"

#include <algorithm>
#include <cmath>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

double uniform_open(std::mt19937_64& rng) {  // in (0, 1): 53 random bits, never 0
  return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
}

double standard_normal(std::mt19937_64& rng) {  // Box-Muller, one draw of the pair
  constexpr double kTwoPi = 6.283185307179586;
  const double radius = std::sqrt(-2.0 * std::log(uniform_open(rng)));
  return radius * std::cos(kTwoPi * uniform_open(rng));
}

int draw_length(const LogNormalLength& dist, std::mt19937_64& rng) {
  const double length = std::exp(dist.mu + dist.sigma * standard_normal(rng));
  return length >= 1e9 ? 1000000000 : std::max(1, static_cast<int>(std::lround(length)));
}

}  // namespace

ShareGptLengthSampler::ShareGptLengthSampler(const ShareGptLengthModel& model, const ShareGptFilter& filter)
    : model_(model), filter_(filter) {
  if (filter.max_prompt_len < filter.min_len || filter.max_total_len < 2 * filter.min_len) {
    throw Error("sharegpt-synthetic: the model's context of " + std::to_string(filter.max_total_len) +
                " tokens is shorter than the smallest pair the ShareGPT filter keeps (" +
                std::to_string(2 * filter.min_len) + ")");
  }
}

LengthPair ShareGptLengthSampler::next(std::mt19937_64& rng) {
  constexpr int kMaxDraws = 10000000;  // about 11% of the pairs are redrawn when the context is 2,048 or more
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    LengthPair pair;
    pair.input = draw_length(model_.input, rng);
    pair.output = draw_length(model_.output, rng);
    if (filter_.accepts(pair.input, pair.output)) return pair;
  }
  throw Error("sharegpt-synthetic: no pair of ShareGPT-like lengths fits the model's context of " +
              std::to_string(filter_.max_total_len) + " tokens in " + std::to_string(kMaxDraws) + " draws");
}

std::vector<Request> make_synthetic_sharegpt_workload(const WorkloadSpec& spec, const Model& model) {
  std::mt19937_64 rng(spec.seed);
  ShareGptLengthSampler sampler(ShareGptLengthModel{}, ShareGptFilter::for_context(model.config.max_context));
  std::vector<Request> requests;
  requests.reserve(static_cast<size_t>(spec.num_prompts));
  for (int i = 0; i < spec.num_prompts; ++i) {
    const LengthPair lengths = sampler.next(rng);
    std::vector<int32_t> prompt(static_cast<size_t>(lengths.input));
    for (int32_t& t : prompt) t = draw_prompt_token(rng, model);
    requests.push_back(make_bench_request(i, std::move(prompt), lengths.output, spec));
  }
  return requests;
}

}  // namespace cbatch
