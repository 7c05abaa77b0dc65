// One pass over the prompts file with the request parser: non-blank lines, first line of every id,
// and the duplicate-id error line of every line that reuses one.
#include "engine/scale/input_index.hpp"

#include <variant>

#include "engine/io/jsonl_reader.hpp"
#include "engine/io/request_builder.hpp"
#include "engine/io/request_parser.hpp"
#include "engine/io/result_format.hpp"

namespace cbatch {

int64_t InputIndex::num_nonblank() const {
  int64_t n = 0;
  for (uint8_t b : has_line) n += b;
  return n;
}

int64_t InputIndex::result_line(const std::string& id_json, const ShardSpec& shard) const {
  const int64_t first = first_use.line_of(id_json);
  if (first < 0 || shard.count == 0 || shard.owns(first)) return first;
  const auto reused = lines_of_reused_id.find(id_json);
  if (reused == lines_of_reused_id.end()) return -1;
  for (int64_t line : reused->second) {
    if (shard.owns(line)) return line;
  }
  return -1;
}

InputIndex index_input(const std::string& path) {
  InputIndex index;
  index.has_line.push_back(0);
  JsonlReader reader(path);
  RequestParser parser;
  JsonlLine line;
  while (reader.next(line)) {
    index.has_line.resize(static_cast<size_t>(line.line_no) + 1, 0);
    index.has_line[static_cast<size_t>(line.line_no)] = 1;
    const ParsedRequest parsed = parser.parse(line);
    const auto* input = std::get_if<RequestInput>(&parsed);
    if (input == nullptr || index.first_use.insert(input->id_json, input->line)) continue;
    const int64_t first = index.first_use.line_of(input->id_json);
    std::vector<int64_t>& lines = index.lines_of_reused_id[input->id_json];
    if (lines.empty()) lines.push_back(first);
    lines.push_back(input->line);
    index.duplicate_error_lines[input->line] = format_error_line(make_duplicate_id_error(*input, first));
  }
  // Blank lines after the last line need no output line and are not counted.
  index.num_lines = static_cast<int64_t>(index.has_line.size()) - 1;
  return index;
}

}  // namespace cbatch
