// Formats one output line per request: the simple shape of docs/formats.md "Output lines", or, for OpenAI
// batch input, the shape vLLM's run_batch writes ({"id", "custom_id", "response": {"status_code",
// "request_id", "body"}, "error"}). Each function returns the line with its trailing "\n".
#pragma once
#include <cstdint>
#include <string>

#include "engine/base/request.hpp"
#include "engine/base/request_result.hpp"
#include "engine/io/result_fields.hpp"

namespace cbatch {

std::string format_result_line(const RequestResult& result, const ResultFormatOptions& options = {});

// An OpenAI-form error needs the custom_id; the parser leaves form kSimple when it could not read one.
std::string format_error_line(const RequestError& error);

}  // namespace cbatch
