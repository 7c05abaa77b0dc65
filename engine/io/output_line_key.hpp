// What one cbatch output line answers, read back from the line (--resume, merge). Output lines are keyed
// like input lines: a simple result by its "id" (normalized as the parser does), an OpenAI result by its
// "custom_id" as a JSON string; error lines by their input line (simple shape: "line"; OpenAI shape:
// "id": "cbatch-<line>"), because a duplicate's error line shares its id with the first line's result.
#pragma once
#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>

namespace cbatch {

struct OutputKey {
  bool is_error = false;
  std::string id_json;  // results
  int64_t line = 0;     // errors
};

// The key of a parsed output line, or nullopt when it is not a cbatch result or error line.
std::optional<OutputKey> output_line_key(simdjson::dom::object obj);

}  // namespace cbatch
