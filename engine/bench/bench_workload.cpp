#include "engine/bench/bench_workload.hpp"

#include <algorithm>
#include <charconv>
#include <random>

#include "engine/core/error.hpp"
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

std::vector<Request> make_random_workload(const WorkloadSpec& spec, const Model& model) {
  std::mt19937_64 rng(spec.seed);
  auto uniform = [&](LengthRange r) { return std::uniform_int_distribution<int>(r.min, r.max)(rng); };
  const Tokenizer& tokenizer = *model.tokenizer;
  std::uniform_int_distribution<int32_t> token_dist(0, model.config.vocab_size - 1);
  auto random_token = [&] {
    for (;;) {
      const int32_t t = token_dist(rng);
      if (t != tokenizer.bos_id() && !tokenizer.is_eos(t)) return t;
    }
  };
  const int context = model.config.max_context;
  if (spec.prefix_len < 0 || spec.num_prefixes < 1 || spec.prefix_len >= context - 1) {
    throw Error("--prefix-len " + std::to_string(spec.prefix_len) + " and --num-prefixes " +
                std::to_string(spec.num_prefixes) + " must leave room in the model's context of " +
                std::to_string(context) + " (and K >= 1)");
  }
  std::vector<std::vector<int32_t>> prefixes(static_cast<size_t>(spec.prefix_len > 0 ? spec.num_prefixes : 0));
  for (auto& prefix : prefixes) {
    prefix.resize(static_cast<size_t>(spec.prefix_len));
    for (int32_t& t : prefix) t = random_token();
  }
  std::vector<Request> requests;
  for (int i = 0; i < spec.num_prompts; ++i) {
    Request r;
    r.index = i;
    r.line = i + 1;
    r.id_json = std::to_string(i);
    const int input_len = std::clamp(spec.prefix_len + uniform(spec.input_len), 1, context - 1);
    if (!prefixes.empty()) r.prompt_ids = prefixes[static_cast<size_t>(i % spec.num_prefixes)];
    r.prompt_ids.resize(static_cast<size_t>(input_len));
    for (size_t t = std::min<size_t>(static_cast<size_t>(spec.prefix_len), r.prompt_ids.size()); t < r.prompt_ids.size(); ++t) {
      r.prompt_ids[t] = random_token();
    }
    r.sampling.max_tokens = std::min(uniform(spec.output_len), context - input_len);
    r.sampling.temperature = spec.temperature;
    r.sampling.top_p = spec.top_p;
    r.sampling.top_k = spec.top_k;
    r.sampling.ignore_eos = true;
    r.sampling.n = spec.n;
    r.rng_seed = request_rng_seed(std::nullopt, spec.seed, r.id_json);
    requests.push_back(std::move(r));
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
