#include "engine/io/prompt_limit.hpp"

#include <algorithm>

namespace cbatch {

int64_t max_token_bytes(const Tokenizer& tokenizer) {
  size_t longest = 1;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    longest = std::max(longest, tokenizer.decode_piece(-1, id).size());
  }
  return static_cast<int64_t>(longest);
}

int64_t max_prompt_bytes(const Tokenizer& tokenizer, int max_context) {
  constexpr int64_t kNormalizationSlack = 8;
  return kNormalizationSlack * max_token_bytes(tokenizer) * max_context;
}

std::optional<std::string> check_prompt_bytes(const RequestInput& input, int64_t limit_bytes, int max_context) {
  int64_t bytes = 0;
  if (input.prompt) bytes = static_cast<int64_t>(input.prompt->size());
  if (input.messages) {
    for (const ChatMessage& m : *input.messages) bytes += static_cast<int64_t>(m.content.size());
  }
  if (bytes <= limit_bytes) return std::nullopt;
  return "prompt of " + std::to_string(bytes) + " bytes cannot fit the model's context of " +
         std::to_string(max_context) + " tokens (with this tokenizer no text over " + std::to_string(limit_bytes) +
         " bytes can)";
}

}  // namespace cbatch
