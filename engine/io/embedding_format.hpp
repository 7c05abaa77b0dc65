// The output line of an embedding request. Simple form: {"id", "embedding": [floats], "prompt_tokens",
// "truncated_tokens", "metrics"}. Floats are written in their shortest round-trip float32 form.
#pragma once
#include <string>

#include "engine/base/request_result.hpp"
#include "engine/io/result_format.hpp"

namespace cbatch {

std::string format_embedding_result(const RequestResult& result, const ResultFormatOptions& options);

}  // namespace cbatch
