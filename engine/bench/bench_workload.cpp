#include "engine/bench/bench_workload.hpp"

#include <algorithm>
#include <charconv>
#include <random>

#include "engine/base/error.hpp"
#include "engine/sample/sampler.hpp"

namespace cbatch {
namespace {

int parse_int(std::string_view text, const std::string& flag) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw Error(flag + ": expected a non-negative integer or A:B, got '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

LengthRange parse_length_range(const std::string& text, const std::string& flag) {
  const size_t colon = text.find(':');
  LengthRange range;
  range.min = parse_int(std::string_view(text).substr(0, colon), flag);
  range.max = colon == std::string::npos ? range.min : parse_int(std::string_view(text).substr(colon + 1), flag);
  if (range.min > range.max) throw Error(flag + ": range '" + text + "' has A > B");
  return range;
}

int32_t draw_prompt_token(std::mt19937_64& rng, const Model& model) {
  const Tokenizer& tokenizer = *model.tokenizer;
  std::uniform_int_distribution<int32_t> token_dist(0, model.config.vocab_size - 1);
  for (;;) {
    const int32_t t = token_dist(rng);
    if (t != tokenizer.bos_id() && !tokenizer.is_eos(t)) return t;
  }
}

Request make_bench_request(int i, std::vector<int32_t> prompt_ids, int max_tokens, const WorkloadSpec& spec) {
  Request r;
  r.index = i;
  r.line = i + 1;
  r.id_json = std::to_string(i);
  r.prompt_ids = std::move(prompt_ids);
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = spec.temperature;
  r.sampling.top_p = spec.top_p;
  r.sampling.top_k = spec.top_k;
  r.sampling.ignore_eos = true;
  r.sampling.n = spec.n;
  r.rng_seed = request_rng_seed(std::nullopt, spec.seed, r.id_json);
  return r;
}

std::vector<Request> make_random_workload(const WorkloadSpec& spec, const Model& model) {
  std::mt19937_64 rng(spec.seed);
  auto uniform = [&](LengthRange r) { return std::uniform_int_distribution<int>(r.min, r.max)(rng); };
  const int context = model.config.max_context;
  if (spec.prefix_len < 0 || spec.num_prefixes < 1 || spec.prefix_len >= context - 1) {
    throw Error("--prefix-len " + std::to_string(spec.prefix_len) + " and --num-prefixes " +
                std::to_string(spec.num_prefixes) + " must leave room in the model's context of " +
                std::to_string(context) + " (and K >= 1)");
  }
  std::vector<std::vector<int32_t>> prefixes(static_cast<size_t>(spec.prefix_len > 0 ? spec.num_prefixes : 0));
  for (auto& prefix : prefixes) {
    prefix.resize(static_cast<size_t>(spec.prefix_len));
    for (int32_t& t : prefix) t = draw_prompt_token(rng, model);
  }
  std::vector<Request> requests;
  for (int i = 0; i < spec.num_prompts; ++i) {
    const int input_len = std::clamp(spec.prefix_len + uniform(spec.input_len), 1, context - 1);
    std::vector<int32_t> prompt;
    if (!prefixes.empty()) prompt = prefixes[static_cast<size_t>(i % spec.num_prefixes)];
    prompt.resize(static_cast<size_t>(input_len));
    for (size_t t = std::min<size_t>(static_cast<size_t>(spec.prefix_len), prompt.size()); t < prompt.size(); ++t) {
      prompt[t] = draw_prompt_token(rng, model);
    }
    const int max_tokens = std::min(uniform(spec.output_len), context - input_len);
    requests.push_back(make_bench_request(i, std::move(prompt), max_tokens, spec));
  }
  return requests;
}

bool VectorSource::next(SourceItem& item) {
  if (next_ >= items_.size()) return false;
  item = std::move(items_[next_++]);
  return true;
}

void CollectingSink::on_result(const RequestResult& result) {
  requests.push_back(*result.request);
  results.push_back(result);
  results.back().request = nullptr;
}

}  // namespace cbatch
