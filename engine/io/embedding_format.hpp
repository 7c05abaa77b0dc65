// The output of an embedding request. Simple form: {"id", "embedding": [floats], "prompt_tokens",
// "truncated_tokens", "metrics"}. OpenAI form (inside the batch envelope of result_format.cpp): the body
// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}, each
// embedding a list of floats or, with encoding_format base64, the base64 of its little-endian float32
// bytes. Floats are written in their shortest round-trip float32 form.
#pragma once
#include <string>

#include "engine/base/request_result.hpp"
#include "engine/io/json_writer.hpp"
#include "engine/io/result_fields.hpp"

namespace cbatch {

std::string format_simple_embedding(const RequestResult& result, const ResultFormatOptions& options);
void write_embedding_body(JsonWriter& w, const RequestResult& result, const ResultFormatOptions& options);

}  // namespace cbatch
