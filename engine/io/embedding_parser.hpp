// The embedding fields of an input line: the simple form's "input" (a string or a list of token ids) and
// "truncate_prompt_tokens", or an OpenAI /v1/embeddings body; the pooling comes from the run's defaults
// (--pooling). Errors throw FieldError naming the field and its value.
#pragma once
#include "engine/base/request.hpp"
#include "engine/io/json_field.hpp"

namespace cbatch {

// True when the line is an embedding line (it has "input"); then `in` holds its EmbeddingInput.
bool parse_simple_embedding(const FieldSet& f, const RequestDefaults& defaults, RequestInput& in);
// The body of an OpenAI /v1/embeddings line: "input" (text, [texts], [ids] or [[ids]]), "encoding_format"
// (float or base64), "dimensions", "model" (a string, not checked), "truncate_prompt_tokens".
void parse_openai_embedding(const FieldSet& body, const RequestDefaults& defaults, RequestInput& in);

}  // namespace cbatch
