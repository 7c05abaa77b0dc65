// Formats one output line per request: the simple shape of DESIGN.md "Output lines", or, for OpenAI
// batch input, the shape vLLM's run_batch writes ({"id", "custom_id", "response": {"status_code",
// "request_id", "body"}, "error"}). Each function returns the line with its trailing "\n".
#pragma once
#include <cstdint>
#include <string>

#include "engine/base/request.hpp"
#include "engine/base/request_result.hpp"
#include "engine/io/json_writer.hpp"

namespace cbatch {

struct ResultFormatOptions {
  std::string model;       // "model" of OpenAI response bodies
  int64_t created_s = -1;  // "created" of OpenAI response bodies (unix seconds); -1: the current time
  int ms_decimals = 3;     // decimals of ttft_ms / e2e_ms
};

std::string format_result_line(const RequestResult& result, const ResultFormatOptions& options = {});

// The simple form's "metrics": {"ttft_ms", "e2e_ms", "first_step", "finish_step"}, without ttft_ms for an
// embedding (it generates no token). Written as the next member of w's open object.
void write_simple_metrics(JsonWriter& w, const RequestResult& result, const ResultFormatOptions& options);

// The model an OpenAI body names: the request's LoRA adapter, else the run's model.
const std::string& result_model(const RequestResult& result, const ResultFormatOptions& options);

// An OpenAI-form error needs the custom_id; the parser leaves form kSimple when it could not read one.
std::string format_error_line(const RequestError& error);

}  // namespace cbatch
