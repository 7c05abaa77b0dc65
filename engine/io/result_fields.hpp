// What every result line's formatter shares (the simple and OpenAI forms of result_format.hpp and their
// parts: embeddings, scores): the run's format options, the simple form's metrics and the model a body names.
#pragma once
#include <cstdint>
#include <string>

#include "engine/base/request_result.hpp"
#include "engine/io/json_writer.hpp"

namespace cbatch {

struct ResultFormatOptions {
  std::string model;       // "model" of OpenAI response bodies
  int64_t created_s = -1;  // "created" of OpenAI response bodies (unix seconds); -1: the current time
  int ms_decimals = 3;     // decimals of ttft_ms / e2e_ms
};

// The simple form's "metrics": {"ttft_ms", "e2e_ms", "first_step", "finish_step"}, without ttft_ms for an
// embedding (it generates no token). Written as the next member of w's open object.
void write_simple_metrics(JsonWriter& w, const RequestResult& result, const ResultFormatOptions& options);

// The model an OpenAI body names: the request's LoRA adapter, else the run's model.
const std::string& result_model(const RequestResult& result, const ResultFormatOptions& options);

}  // namespace cbatch
