// --resume support: reads an existing output file back. A result line is keyed by its id (ids of
// results are unique: a duplicate id is an error line); an error line by the input line it answers
// (simple shape: "line"; OpenAI shape: "id": "cbatch-<line>"), because a duplicate's error line shares
// its id with the first line's result. A torn last line (no newline, or not an output line, as a killed
// writer leaves it) is not counted and is reported by offset so the caller can cut it off before
// appending. Only the last line is ever treated as torn.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/io/id_set.hpp"

namespace cbatch {

struct ResumeState {
  IdSet result_ids;                  // id_json of each complete result line (as the parser keys ids)
  std::vector<int64_t> error_lines;  // (num error lines) input line numbers of complete error lines, sorted
  int64_t valid_bytes = 0;    // where the content ends without the torn last line; cut from here
  int64_t file_bytes = 0;     // size of the file; valid_bytes < file_bytes means a torn last line
  int64_t num_bad_lines = 0;  // other lines that are not output lines (a sign of the wrong file)
  bool stopped = false;       // the stop flag came before the end of the file: the state is partial

  bool has_result(std::string_view id_json) const { return result_ids.contains(id_json); }
  bool has_error_line(int64_t line) const;
};

// A missing file gives an empty state (nothing finished yet). Throws cbatch::Error when the file
// exists but cannot be read, or is not a regular file (a device, a named pipe: nothing to read back).
// A non-zero *stop ends the read within one chunk (a file of gigabytes takes seconds): the state is then
// marked stopped, and must not be used to skip requests.
ResumeState read_resume_state(const std::string& path, const std::atomic<int>* stop = nullptr);

// Cuts the file to state.valid_bytes (no-op when there is no torn tail, or the read was stopped). Throws
// cbatch::Error.
void truncate_torn_tail(const std::string& path, const ResumeState& state);

}  // namespace cbatch
