// --resume support: reads an existing output file back and lists the ids that already have a result
// or error line, so the run can skip them and append the rest. A torn last line (no newline, or not
// an output line, as a killed writer leaves it) is not counted and is reported by offset so the caller
// can cut it off before appending. Only the last line is ever treated as torn.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_set>

namespace cbatch {

struct ResumeState {
  std::unordered_set<std::string> finished_ids;  // id_json of each complete line (as the parser keys)
  int64_t valid_bytes = 0;    // where the content ends without the torn last line; cut from here
  int64_t file_bytes = 0;     // size of the file; valid_bytes < file_bytes means a torn last line
  int64_t num_bad_lines = 0;  // other lines that are not output lines (a sign of the wrong file)
};

// A missing file gives an empty state (nothing finished yet). Throws cbatch::Error when the file
// exists but cannot be read.
ResumeState read_finished_ids(const std::string& path);

// Cuts the file to state.valid_bytes (no-op when there is no torn tail). Throws cbatch::Error.
void truncate_torn_tail(const std::string& path, const ResumeState& state);

}  // namespace cbatch
