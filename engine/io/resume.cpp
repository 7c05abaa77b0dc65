// Output lines are keyed like input lines: a simple result by its "id" (normalized as the parser
// does), an OpenAI result by its "custom_id" as a JSON string; error lines by their input line.
#include "engine/io/resume.hpp"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <system_error>

#include "engine/core/error.hpp"
#include "engine/io/json_writer.hpp"
#include "engine/io/jsonl_reader.hpp"

namespace cbatch {
namespace {

// What one complete output line answers: a result for an id, or an error for an input line.
struct OutputKey {
  bool is_error = false;
  std::string id_json;  // results
  int64_t line = 0;     // errors
};

std::optional<int64_t> positive_int(simdjson::dom::element v) {
  int64_t n = 0;
  if (v.get_int64().get(n) != simdjson::SUCCESS || n <= 0) return std::nullopt;
  return n;
}

// "cbatch-<line>", the id result_format gives OpenAI lines.
std::optional<int64_t> batch_id_line(simdjson::dom::element v) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS || !s.starts_with("cbatch-")) return std::nullopt;
  int64_t n = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data() + 7, end, n);
  if (ec != std::errc() || ptr != end || n <= 0) return std::nullopt;
  return n;
}

std::optional<OutputKey> openai_key(simdjson::dom::object obj, simdjson::dom::element custom_id) {
  std::string_view s;
  if (custom_id.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
  simdjson::dom::element error;
  if (obj.at_key("error").get(error) == simdjson::SUCCESS && !error.is_null()) {
    simdjson::dom::element id;
    if (obj.at_key("id").get(id) != simdjson::SUCCESS) return std::nullopt;
    const auto line = batch_id_line(id);
    return line ? std::optional<OutputKey>({true, "", *line}) : std::nullopt;
  }
  return OutputKey{false, json_quote(s), 0};
}

std::optional<OutputKey> simple_key(simdjson::dom::object obj) {
  simdjson::dom::element v;
  if (obj.at_key("error").get(v) == simdjson::SUCCESS) {
    if (obj.at_key("line").get(v) != simdjson::SUCCESS) return std::nullopt;
    const auto line = positive_int(v);
    return line ? std::optional<OutputKey>({true, "", *line}) : std::nullopt;
  }
  if (obj.at_key("id").get(v) != simdjson::SUCCESS) return std::nullopt;
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) return OutputKey{false, json_quote(s), 0};
  if (v.is_int64() || v.is_uint64()) return OutputKey{false, simdjson::minify(v), 0};
  return std::nullopt;
}

// The key of an output line, or nullopt when it is not a cbatch result or error line.
std::optional<OutputKey> output_line_key(simdjson::dom::parser& parser, const JsonlLine& line) {
  simdjson::dom::object obj;
  if (parser.parse(line.buffer.data(), line.size, false).get(obj) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  simdjson::dom::element custom_id;
  if (obj.at_key("custom_id").get(custom_id) == simdjson::SUCCESS) return openai_key(obj, custom_id);
  return simple_key(obj);
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

bool ResumeState::has_error_line(int64_t line) const {
  return std::binary_search(error_lines.begin(), error_lines.end(), line);
}

ResumeState read_resume_state(const std::string& path) {
  ResumeState state;
  if (!file_exists(path)) return state;
  JsonlReader reader(path);
  simdjson::dom::parser parser;
  JsonlLine line;
  bool is_last_bad = false;
  int64_t last_begin = 0;
  while (reader.next(line)) {
    const std::optional<OutputKey> key = line.truncated ? std::nullopt : output_line_key(parser, line);
    is_last_bad = !key.has_value();
    if (!key) {
      ++state.num_bad_lines;
      last_begin = line.begin_offset;
    } else if (key->is_error) {
      state.error_lines.push_back(key->line);
    } else {
      state.result_ids.insert(key->id_json, line.line_no);
    }
  }
  std::sort(state.error_lines.begin(), state.error_lines.end());
  state.file_bytes = reader.offset();
  state.valid_bytes = state.file_bytes;
  if (is_last_bad) {  // the torn tail: only ever the last line, so a wrong file is never emptied
    --state.num_bad_lines;
    state.valid_bytes = last_begin;
  }
  return state;
}

void truncate_torn_tail(const std::string& path, const ResumeState& state) {
  if (state.valid_bytes >= state.file_bytes) return;
  std::error_code ec;
  std::filesystem::resize_file(path, static_cast<uintmax_t>(state.valid_bytes), ec);
  if (ec) throw Error("cannot truncate '" + path + "': " + ec.message());
}

}  // namespace cbatch
