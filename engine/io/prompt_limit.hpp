// A cheap upper bound on the prompt text that can fit the model's context, checked before tokenizing
// so that a 10 MB prompt is refused at once instead of costing seconds and gigabytes in the tokenizer.
// A token decodes to at most max_token_bytes bytes, so text longer than context * max_token_bytes
// needs more tokens than the context holds; a factor of 8 leaves room for normalizing tokenizers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/base/request.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

// Bytes of the longest piece any token decodes to (at least 1).
int64_t max_token_bytes(const Tokenizer& tokenizer);

// Prompt texts longer than this cannot fit `max_context` tokens.
int64_t max_prompt_bytes(const Tokenizer& tokenizer, int max_context);

// An error message when the line's prompt text (or its chat messages' contents) exceeds limit_bytes.
std::optional<std::string> check_prompt_bytes(const RequestInput& input, int64_t limit_bytes, int max_context);

}  // namespace cbatch
