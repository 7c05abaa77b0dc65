// The embedding fields of an input line: the simple form's "input" (a string or a list of token ids) and
// "truncate_prompt_tokens"; the pooling comes from the run's defaults (--pooling). Errors throw FieldError
// naming the field and its value.
#pragma once
#include "engine/base/request.hpp"
#include "engine/io/json_field.hpp"

namespace cbatch {

// True when the line is an embedding line (it has "input"); then `in` holds its prompt and EmbeddingInput.
bool parse_simple_embedding(const FieldSet& f, const RequestDefaults& defaults, RequestInput& in);

}  // namespace cbatch
