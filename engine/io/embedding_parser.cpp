#include "engine/io/embedding_parser.hpp"

namespace cbatch {
namespace {

// One input: a non-empty string or a non-empty list of token ids.
void read_one_input(simdjson::dom::element v, const std::string& name, EmbeddingInput& e) {
  if (v.is_string()) {
    const std::string_view text = get_string(v, name);
    if (text.empty()) fail_field(name, "a non-empty string or list of token ids", v);
    e.texts.emplace_back(text);
    return;
  }
  std::vector<int32_t> ids = get_token_ids(v, name, kMaxPromptTokenIds);
  if (ids.empty()) fail_field(name, "a non-empty string or list of token ids", v);
  e.token_ids.push_back(std::move(ids));
}

void read_truncation(const FieldSet& f, EmbeddingInput& e) {
  if (auto v = f.find("truncate_prompt_tokens")) {
    e.truncate_prompt_tokens = static_cast<int>(get_int(*v, f.name("truncate_prompt_tokens"), 1, 1 << 24, "a positive integer"));
  }
}

}  // namespace

bool parse_simple_embedding(const FieldSet& f, const RequestDefaults& defaults, RequestInput& in) {
  const auto input = f.find("input");
  if (!input) return false;
  for (const char* other : {"prompt", "prompt_token_ids", "messages"}) {
    if (f.find(other)) throw FieldError(std::string("more than one input: 'input' (an embedding) and '") + other + "'");
  }
  EmbeddingInput e;
  read_one_input(*input, f.name("input"), e);
  e.pooling = defaults.pooling;
  e.decoder_allowed = defaults.embed_task;
  read_truncation(f, e);
  in.embedding = std::move(e);
  return true;
}

// "input": a string, a list of strings, a list of token ids, or a list of such lists (OpenAI's four forms).
void parse_openai_embedding(const FieldSet& body, const RequestDefaults& defaults, RequestInput& in) {
  const auto input = body.find("input");
  if (!input) throw FieldError("no input: give 'body.input'");
  const std::string name = body.name("input");
  EmbeddingInput e;
  simdjson::dom::array list;
  simdjson::dom::element first;
  if (input->get_array().get(list) == simdjson::SUCCESS && list.at(0).get(first) == simdjson::SUCCESS &&
      (first.is_string() || first.is_array())) {
    size_t i = 0;
    for (simdjson::dom::element item : list) read_one_input(item, name + "[" + std::to_string(i++) + "]", e);
    if (e.texts.size() > 0 && e.token_ids.size() > 0) fail_field(name, "a list of strings or a list of token id lists, not both", *input);
  } else {
    read_one_input(*input, name, e);
  }
  if (auto v = body.find("encoding_format")) {
    const std::string_view format = get_string(*v, body.name("encoding_format"));
    if (format != "float" && format != "base64") fail_field(body.name("encoding_format"), "\"float\" or \"base64\"", *v);
    e.base64 = format == "base64";
  }
  if (auto v = body.find("dimensions")) {
    e.dimensions = static_cast<int>(get_int(*v, body.name("dimensions"), 1, 1 << 20, "a positive integer"));
  }
  e.pooling = defaults.pooling;
  e.decoder_allowed = defaults.embed_task;
  read_truncation(body, e);
  in.embedding = std::move(e);
}

}  // namespace cbatch
