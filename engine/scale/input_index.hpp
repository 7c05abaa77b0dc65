// What `merge` needs to know of the prompts file: which line numbers hold a line (blank lines get no
// output line), the id each parsed line claims, and the lines whose id an earlier line already used.
// Built with the parser `run` uses, so ids are keyed exactly as a run keys them. A single process gives
// such a line a "duplicate id" error line; a shard sees only its own lines, so merge writes that error
// line itself (prebuilt here) whichever shard answered the line.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/io/id_set.hpp"
#include "engine/io/shard_spec.hpp"

namespace cbatch {

struct InputIndex {
  int64_t num_lines = 0;              // line numbers run 1..num_lines, blank lines included
  std::vector<uint8_t> has_line;      // (num_lines + 1) 1 where the line is not blank
  IdSet first_use;                    // id_json -> the first line that claims it
  std::unordered_map<int64_t, std::string> duplicate_error_lines;  // line -> its output line (with "\n")
  std::unordered_map<std::string, std::vector<int64_t>> lines_of_reused_id;  // id_json -> every line, in order

  int64_t num_nonblank() const;
  // The input line a result line with this id answers in `shard` (the first line of the shard that claims
  // the id: a shard answers its later ones with error lines), or -1 when no line of the shard claims it.
  // shard.count == 0: any shard (the first line overall).
  int64_t result_line(const std::string& id_json, const ShardSpec& shard) const;
};

// Throws cbatch::Error when the file cannot be read.
InputIndex index_input(const std::string& path);

}  // namespace cbatch
