#include "engine/io/score_parser.hpp"

namespace cbatch {
namespace {

constexpr size_t kMaxScorePairs = 100'000;

// A string, or a non-empty list of strings.
std::vector<std::string> read_texts(const FieldSet& body, std::string_view key) {
  const auto v = body.find(key);
  const std::string name = body.name(key);
  if (!v) throw FieldError("field '" + name + "' is required");
  if (v->is_string()) return {std::string(get_string(*v, name))};
  simdjson::dom::array arr;
  if (v->get_array().get(arr) != simdjson::SUCCESS || arr.size() == 0 || arr.size() > kMaxScorePairs) {
    fail_field(name, "a string or a non-empty list of at most 100000 strings", *v);
  }
  std::vector<std::string> texts;
  for (simdjson::dom::element e : arr) texts.emplace_back(get_string(e, name + "[" + std::to_string(texts.size()) + "]"));
  return texts;
}

}  // namespace

ScoreInput read_score_body(const FieldSet& body) {
  ScoreInput in;
  in.text_1 = read_texts(body, "text_1");
  in.text_2 = read_texts(body, "text_2");
  if (in.text_1.size() > 1 && in.text_1.size() != in.text_2.size()) {
    throw FieldError("'" + body.name("text_1") + "' has " + std::to_string(in.text_1.size()) + " texts and '" +
                     body.name("text_2") + "' " + std::to_string(in.text_2.size()) +
                     ": give one text_1 against any number of text_2, or lists of equal length");
  }
  return in;
}

ScoreInput read_rerank_body(const FieldSet& body) {
  ScoreInput in;
  const auto query = body.find("query");
  if (!query) throw FieldError("field '" + body.name("query") + "' is required");
  in.text_1 = {std::string(get_string(*query, body.name("query")))};
  const auto docs = body.find("documents");
  simdjson::dom::array arr;
  if (!docs || docs->get_array().get(arr) != simdjson::SUCCESS || arr.size() == 0) {
    if (!docs) throw FieldError("no documents: field '" + body.name("documents") + "' is required");
    fail_field(body.name("documents"), "a non-empty list of strings", *docs);
  }
  in.text_2 = read_texts(body, "documents");
  if (const auto top_n = body.find("top_n")) {
    in.top_n = static_cast<int>(get_int(*top_n, body.name("top_n"), 0, INT32_MAX, "an integer >= 0 (0: all documents)"));
  }
  return in;
}

}  // namespace cbatch
