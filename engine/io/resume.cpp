// Output lines are keyed as output_line_key.hpp describes.
#include "engine/io/resume.hpp"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>

#include "engine/base/error.hpp"
#include "engine/io/jsonl_reader.hpp"
#include "engine/io/output_line_key.hpp"

namespace cbatch {
namespace {

// The key of an output line, or nullopt when it is not a cbatch result or error line.
std::optional<OutputKey> parse_output_line(simdjson::dom::parser& parser, const JsonlLine& line) {
  simdjson::dom::object obj;
  if (parser.parse(line.buffer.data(), line.size, false).get(obj) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return output_line_key(obj);
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
    const std::optional<OutputKey> key = line.truncated ? std::nullopt : parse_output_line(parser, line);
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
