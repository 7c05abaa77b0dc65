// Reads the output files of a sharded run and places each line at the input line it answers (an error
// line by its "line", a result line by its id through the InputIndex and the file's shard), without
// keeping any text: a slot records the file and byte range, so merging a million lines takes tens of MB.
// What cannot be placed, or is placed twice, is collected with the lines named, for the merge report.
#pragma once
#include <simdjson.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/jsonl_reader.hpp"
#include "engine/scale/input_index.hpp"

namespace cbatch {

struct OutputSlot {
  int64_t offset = 0;     // of the line's first byte in that file
  int32_t file = -1;      // index into the shard files; -1: no output line yet
  int32_t length = 0;     // bytes, newline included
  bool is_error = false;  // an error line (else a result line)
};

struct ShardScan {
  std::vector<OutputSlot> slots;  // (index.num_lines + 1) indexed by input line
  std::vector<std::string> problems;
  std::map<std::pair<int, int>, std::vector<int64_t>> answered_twice;  // (file a, file b) -> input lines
  int64_t prompt_tokens = 0;      // of the result lines
  int64_t completion_tokens = 0;
  std::vector<double> ttft_ms;    // (result lines with metrics) for the merged percentiles
  std::vector<double> e2e_ms;
};

class ShardScanner {
 public:
  ShardScanner(const InputIndex& index, const std::vector<std::string>& files);
  // Reads file number `file`; shard.count == 0 when the file's shard is unknown (no summary).
  void scan(int file, const ShardSpec& shard);
  ShardScan& scan_result() { return scan_; }

 private:
  struct FileProblems;
  void place(int file, const ShardSpec& shard, const JsonlLine& line, simdjson::dom::parser& parser,
             FileProblems& problems);
  void record(int file, int64_t input_line, const OutputSlot& slot);
  void report(int file, const ShardSpec& shard, FileProblems& problems);

  const InputIndex& index_;
  const std::vector<std::string>& files_;
  ShardScan scan_;
};

// "3, 6, 9 and 120 more" (the first few of a sorted list).
std::string list_lines(const std::vector<int64_t>& lines);

}  // namespace cbatch
