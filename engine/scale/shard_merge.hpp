// `merge`: the output files of a sharded run (one per task, each with its summary) into one output in
// input order. It first checks that the shards cover the input exactly: every summary names a shard of
// the same count and the same input (size and hash, see input_fingerprint.hpp), each shard once; every
// non-blank input line has exactly one output line; no file has a torn last line or a line that is not an
// output line. Any problem is reported with the files and lines it concerns and nothing is written.
// Otherwise each line is copied byte for byte from its shard, so the output equals a single process's
// --ordered output but for timing metrics; a line whose id an earlier line in another shard used gets the
// "duplicate id" error line a single process gives it. The output is written to a temporary file renamed
// over OUT at the end, so OUT is never half-written (engine/base/replaced_file.hpp: through a symlink to
// its target; an OUT that exists and is not a regular file is refused before anything is read). The
// input and the shard files are each read twice, so they must be regular files too.
#pragma once
#include <string>
#include <vector>

#include "engine/core/run_stats.hpp"

namespace cbatch {

struct MergeSources {
  std::string input;                    // the prompts file the tasks read
  std::vector<std::string> shards;      // the tasks' output files
  std::vector<std::string> summaries;   // their summaries, in the same order
};

struct MergeResult {
  std::vector<std::string> problems;  // empty when the shards cover the input exactly
  RunSummary summary;                 // merged: requests, tokens and percentiles from the lines
  std::string mode;
  std::string device;
  int num_shards = 0;
  int64_t lines_written = 0;
  int64_t duplicate_ids = 0;          // lines merge answered with the duplicate-id error line
};

// Throws cbatch::Error on an unreadable input or shard, or an output that cannot be written or replaced.
MergeResult merge_shards(const MergeSources& sources, const std::string& output);

}  // namespace cbatch
