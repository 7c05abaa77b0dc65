#include "engine/bench/sharegpt_dataset.hpp"

#include <numeric>

#include "engine/bench/python_random.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw Error("ShareGPT file '" + path + "': " + problem);
}

std::string entry_name(size_t entry) { return "conversation " + std::to_string(entry) + " (0-based)"; }

// What a failed get_object()/get_array() means: a value of another type, or a document that is not JSON.
std::string type_problem(simdjson::error_code error, const char* expected) {
  return error == simdjson::INCORRECT_TYPE ? std::string(" is not ") + expected
                                           : std::string(": ") + simdjson::error_message(error);
}

}  // namespace

ShareGptFile::ShareGptFile(std::string path) : path_(std::move(path)) {
  if (auto error = simdjson::padded_string::load(path_).get(json_)) {
    fail(path_, std::string("cannot read it: ") + simdjson::error_message(error));
  }
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::array entries;
  if (auto error = parser.iterate(json_).get(doc)) {
    fail(path_, std::string("not JSON: ") + simdjson::error_message(error));
  }
  if (doc.get_array().get(entries)) fail(path_, "expected a JSON list of conversations (the ShareGPT format)");
  index(entries);
  if (!doc.current_location().error()) fail(path_, "content after the list of conversations");
}

// One pass over the list; a malformed document surfaces as an error of the entry being read.
void ShareGptFile::index(simdjson::ondemand::array entries) {
  size_t entry = 0;
  for (auto item : entries) {
    const std::string where = entry_name(entry);
    simdjson::ondemand::object object;
    if (auto error = item.get_object().get(object)) fail(path_, where + type_problem(error, "an object"));
    simdjson::ondemand::value conversations;
    auto error = object.find_field_unordered("conversations").get(conversations);
    if (error == simdjson::NO_SUCH_FIELD) {  // skipped, as vLLM skips it
      ++entry;
      continue;
    }
    simdjson::ondemand::array turns;
    if (error || (error = conversations.get_array().get(turns))) {
      fail(path_, where + "'s 'conversations'" + type_problem(error, "a list"));
    }
    FirstTurns first{entry, {}};
    int num_turns = 0;
    for (auto turn : turns) {
      simdjson::ondemand::object turn_object;
      std::string_view raw;
      if ((error = turn.get_object().get(turn_object)) || (error = turn_object.raw_json().get(raw))) {
        fail(path_, where + ", turn " + std::to_string(num_turns) + type_problem(error, "an object"));
      }
      if (num_turns < 2) first.turn[num_turns] = raw;
      ++num_turns;
    }
    if (num_turns >= 2) turns_.push_back(first);
    ++entry;
  }
}

std::string ShareGptFile::turn_text(size_t i, int turn) const {
  const FirstTurns& first = turns_.at(i);
  const std::string_view raw = first.turn[turn];
  // The view lies inside json_, whose padding follows the whole file: enough for simdjson to read past it.
  const size_t allocated = static_cast<size_t>(json_.data() + json_.size() - raw.data()) + simdjson::SIMDJSON_PADDING;
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  std::string_view value;
  if (parser.iterate(raw.data(), raw.size(), allocated).get(doc) || doc["value"].get_string().get(value)) {
    fail(path_, entry_name(first.entry) + ", turn " + std::to_string(turn) + ": no string field 'value'");
  }
  return std::string(value);
}

std::vector<ShareGptSample> sample_sharegpt(const ShareGptFile& file, uint64_t seed, int num_prompts,
                                            const ShareGptFilter& filter, const EncodeText& encode) {
  std::vector<size_t> order(file.num_conversations());
  std::iota(order.begin(), order.end(), size_t{0});
  PythonRandom(seed).shuffle(order);
  std::vector<ShareGptSample> samples;
  for (size_t i = 0; i < order.size() && static_cast<int>(samples.size()) < num_prompts; ++i) {
    ShareGptSample sample;
    sample.conversation = order[i];
    sample.prompt_ids = encode(file.turn_text(order[i], 0));
    sample.output_len = static_cast<int>(encode(file.turn_text(order[i], 1)).size());
    if (filter.accepts(static_cast<int>(sample.prompt_ids.size()), sample.output_len)) {
      samples.push_back(std::move(sample));
    }
  }
  return samples;
}

std::vector<Request> make_sharegpt_workload(const std::string& path, const WorkloadSpec& spec, const Model& model) {
  const ShareGptFile file(path);
  const Tokenizer& tokenizer = *model.tokenizer;
  const EncodeText encode = [&](const std::string& text) { return tokenizer.encode(text, true); };
  std::vector<ShareGptSample> samples =
      sample_sharegpt(file, spec.seed, spec.num_prompts, ShareGptFilter::for_context(model.config.max_context), encode);
  if (static_cast<int>(samples.size()) < spec.num_prompts) {
    fail(path, "only " + std::to_string(samples.size()) + " of its " + std::to_string(file.num_conversations()) +
                   " conversations with two turns pass the length filter; --num-prompts asks for " +
                   std::to_string(spec.num_prompts));
  }
  std::vector<Request> requests;
  requests.reserve(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    ShareGptSample& sample = samples[i];
    requests.push_back(make_bench_request(static_cast<int>(i), std::move(sample.prompt_ids), sample.output_len, spec));
  }
  return requests;
}

}  // namespace cbatch
