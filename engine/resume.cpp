// Output lines are keyed like input lines: a simple line by its "id" (normalized as the parser does),
// an OpenAI line by its "custom_id" as a JSON string.
#include "engine/resume.hpp"

#include <simdjson.h>

#include <filesystem>
#include <optional>
#include <system_error>

#include "engine/error.hpp"
#include "engine/json_writer.hpp"
#include "engine/jsonl_reader.hpp"

namespace cbatch {
namespace {

// The id_json of an output line, or nullopt when it is not a cbatch result or error line.
std::optional<std::string> output_line_id(simdjson::dom::parser& parser, const JsonlLine& line) {
  simdjson::dom::object obj;
  if (parser.parse(line.buffer.data(), line.size, false).get(obj) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  simdjson::dom::element id;
  std::string_view s;
  if (obj.at_key("custom_id").get(id) == simdjson::SUCCESS) {
    if (id.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
    return json_quote(s);
  }
  if (obj.at_key("id").get(id) != simdjson::SUCCESS) return std::nullopt;
  if (id.get_string().get(s) == simdjson::SUCCESS) return json_quote(s);
  if (id.is_int64() || id.is_uint64()) return simdjson::minify(id);
  return std::nullopt;
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

ResumeState read_finished_ids(const std::string& path) {
  ResumeState state;
  if (!file_exists(path)) return state;
  JsonlReader reader(path);
  simdjson::dom::parser parser;
  JsonlLine line;
  bool is_last_bad = false;
  int64_t last_begin = 0;
  while (reader.next(line)) {
    const std::optional<std::string> id = line.truncated ? std::nullopt : output_line_id(parser, line);
    is_last_bad = !id.has_value();
    if (id) {
      state.finished_ids.insert(*id);
    } else {
      ++state.num_bad_lines;
      last_begin = line.begin_offset;
    }
  }
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
