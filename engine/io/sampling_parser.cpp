// One small reader per sampling field; the accepted ranges follow vLLM's SamplingParams checks.
#include "engine/io/sampling_parser.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "engine/base/elide.hpp"

namespace cbatch {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

int read_max_tokens(const FieldSet& f, std::string_view key, int fallback) {
  const auto v = f.find(key);
  if (!v) return fallback;
  const std::string name = f.name(key);
  const int64_t n = get_int(*v, name, 0, kInt64Max, "a non-negative integer");
  if (n > kMaxMaxTokens) fail_field(name, "at most " + std::to_string(kMaxMaxTokens), *v);
  return static_cast<int>(n);
}

// stop: one string or a list of strings, none empty.
std::vector<std::string> read_stop(simdjson::dom::element v, const std::string& name) {
  std::vector<std::string> stops;
  if (v.is_string()) {
    stops.emplace_back(get_string(v, name));
  } else if (v.is_array()) {
    for (simdjson::dom::element e : v.get_array()) {
      if (!e.is_string()) fail_field(name, "a string or a list of strings", v);
      stops.emplace_back(get_string(e, name));
    }
  } else {
    fail_field(name, "a string or a list of strings", v);
  }
  for (const std::string& s : stops) {
    if (s.empty()) fail_field(name, "a non-empty string or a list of non-empty strings", v);
  }
  return stops;
}

void read_penalties(const FieldSet& f, SamplingParams& out) {
  if (auto v = f.find("repetition_penalty")) {
    out.repetition_penalty = get_float(*v, f.name("repetition_penalty"),
                                       [](double x) { return x > 0; }, "a number > 0");
  }
  if (auto v = f.find("presence_penalty")) {
    out.presence_penalty = get_float(*v, f.name("presence_penalty"),
                                     [](double x) { return x >= -2 && x <= 2; }, "a number in [-2, 2]");
  }
  if (auto v = f.find("frequency_penalty")) {
    out.frequency_penalty = get_float(*v, f.name("frequency_penalty"),
                                      [](double x) { return x >= -2 && x <= 2; }, "a number in [-2, 2]");
  }
}

void read_filters(const FieldSet& f, SamplingParams& out) {
  if (auto v = f.find("temperature")) {
    out.temperature = get_float(*v, f.name("temperature"), [](double x) { return x >= 0; },
                                "a number >= 0");
  }
  if (auto v = f.find("top_p")) {
    out.top_p = get_float(*v, f.name("top_p"), [](double x) { return x > 0 && x <= 1; },
                          "a number in (0, 1]");
  }
  if (auto v = f.find("top_k")) {
    out.top_k = static_cast<int>(
        get_int(*v, f.name("top_k"), -1, kInt32Max, "an integer >= 1, or -1 or 0 for no limit"));
  }
  if (auto v = f.find("min_p")) {
    out.min_p = get_float(*v, f.name("min_p"), [](double x) { return x >= 0 && x <= 1; },
                          "a number in [0, 1]");
  }
}

void read_stops(const FieldSet& f, SamplingParams& out) {
  if (auto v = f.find("stop")) out.stop = read_stop(*v, f.name("stop"));
  if (auto v = f.find("stop_token_ids")) {
    out.stop_token_ids = get_token_ids(*v, f.name("stop_token_ids"), 1 << 16);
  }
  if (auto v = f.find("ignore_eos")) out.ignore_eos = get_bool(*v, f.name("ignore_eos"));
}

// logit_bias: {"token id": bias, ...} (OpenAI's form: the ids are the object's keys), bias in [-100, 100].
// The ids are checked against the vocabulary when the request is built (check_logit_bias).
std::vector<std::pair<int32_t, float>> read_logit_bias(simdjson::dom::element v, const std::string& name) {
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    fail_field(name, "an object of token ids (as strings) to biases in [-100, 100]", v);
  }
  std::vector<std::pair<int32_t, float>> bias;
  for (const auto field : obj) {
    const std::string_view key = field.key;
    const std::string entry = name + "[\"" + elide(key, 24) + "\"]";
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (key.empty() || ec != std::errc() || end != key.data() + key.size() || id < 0) {
      throw FieldError("field '" + name + "' has the key \"" + elide(key, 24) +
                       "\": its keys must be token ids, non-negative integers written as strings");
    }
    const float b = get_float(field.value, entry, [](double x) { return x >= -100 && x <= 100; }, "a number in [-100, 100]");
    bias.emplace_back(id, b);
  }
  std::sort(bias.begin(), bias.end());
  for (size_t i = 1; i < bias.size(); ++i) {
    if (bias[i].first == bias[i - 1].first) {
      throw FieldError("field '" + name + "' names token " + std::to_string(bias[i].first) + " twice");
    }
  }
  return bias;
}

// best_of: vLLM V1 dropped it (n samples are all returned); 1 is accepted as the no-op it is.
void refuse_best_of(const FieldSet& f) {
  const auto v = f.find("best_of");
  if (!v) return;
  int64_t best_of = 0;
  if (v->get_int64().get(best_of) == simdjson::SUCCESS && best_of == 1) return;
  throw FieldError("field '" + f.name("best_of") + "' is not supported (got " + show_value(*v) +
                   "): as in vLLM V1, every sample is returned; ask for them with 'n'");
}

}  // namespace

void parse_sampling_fields(const FieldSet& fields, const RequestDefaults& defaults,
                           SamplingParams& out) {
  // OpenAI chat bodies name it max_completion_tokens; like vLLM, it wins over max_tokens.
  const int max_tokens = read_max_tokens(fields, "max_tokens", defaults.max_tokens);
  out.max_tokens = read_max_tokens(fields, "max_completion_tokens", max_tokens);
  read_filters(fields, out);
  if (auto v = fields.find("n")) {
    out.n = static_cast<int>(get_int(*v, fields.name("n"), 1, kMaxSamplesPerRequest,
                                     "an integer from 1 to " + std::to_string(kMaxSamplesPerRequest)));
  }
  if (auto v = fields.find("seed")) {
    uint64_t seed = 0;
    if (v->get_uint64().get(seed) != simdjson::SUCCESS) {
      fail_field(fields.name("seed"), "a non-negative integer", *v);
    }
    out.seed = seed;
  }
  refuse_best_of(fields);
  read_stops(fields, out);
  read_penalties(fields, out);
  if (auto v = fields.find("logit_bias")) out.logit_bias = read_logit_bias(*v, fields.name("logit_bias"));
  parse_constraint_fields(fields, out);
}

}  // namespace cbatch
