#include "engine/io/embedding_parser.hpp"

#include "engine/io/request_parser.hpp"

namespace cbatch {

bool parse_simple_embedding(const FieldSet& f, const RequestDefaults& defaults, RequestInput& in) {
  const auto input = f.find("input");
  if (!input) return false;
  for (const char* other : {"prompt", "prompt_token_ids", "messages"}) {
    if (f.find(other)) throw FieldError(std::string("more than one input: 'input' (an embedding) and '") + other + "'");
  }
  const std::string name = f.name("input");
  if (input->is_string()) {
    in.prompt = std::string(get_string(*input, name));
    if (in.prompt->empty()) fail_field(name, "a non-empty string or list of token ids", *input);
  } else {
    in.prompt_token_ids = get_token_ids(*input, name, kMaxPromptTokenIds);
    if (in.prompt_token_ids->empty()) fail_field(name, "a non-empty string or list of token ids", *input);
  }
  EmbeddingInput e;
  e.pooling = defaults.pooling;
  if (auto v = f.find("truncate_prompt_tokens")) {
    e.truncate_prompt_tokens = static_cast<int>(get_int(*v, f.name("truncate_prompt_tokens"), 1, 1 << 24, "a positive integer"));
  }
  in.embedding = e;
  return true;
}

}  // namespace cbatch
