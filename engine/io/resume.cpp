// Output lines are keyed as output_line_key.hpp describes.
#include "engine/io/resume.hpp"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>

#include "engine/base/error.hpp"
#include "engine/base/file_type.hpp"
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

}  // namespace

bool ResumeState::has_error_line(int64_t line) const {
  return std::binary_search(error_lines.begin(), error_lines.end(), line);
}

ResumeState read_resume_state(const std::string& path, const std::atomic<int>* stop) {
  ResumeState state;
  // A device or a named pipe keeps no lines to read back: /dev/zero would be read forever, a pipe's
  // bytes would be taken from its reader. Checked before the open, which on a pipe waits for a writer.
  if (!require_regular_file(path, "--resume reads the output file back and appends to it, so it must be a regular file")) {
    return state;
  }
  JsonlReader reader(path);
  reader.set_stop_flag(stop);
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
  if (reader.stopped()) {  // only part of the file was read: nothing is known of the rest, nothing is cut
    state.stopped = true;
    return state;
  }
  if (is_last_bad) {  // the torn tail: only ever the last line, so a wrong file is never emptied
    --state.num_bad_lines;
    state.valid_bytes = last_begin;
  }
  return state;
}

void truncate_torn_tail(const std::string& path, const ResumeState& state) {
  if (state.stopped || state.valid_bytes >= state.file_bytes) return;
  std::error_code ec;
  std::filesystem::resize_file(path, static_cast<uintmax_t>(state.valid_bytes), ec);
  if (ec) throw Error("cannot truncate '" + path + "': " + ec.message());
}

}  // namespace cbatch
