// Merges shard outputs and reports on stderr, for `merge` and for `run --data-parallel-size`.
#pragma once
#include <string>

#include "engine/scale/shard_merge.hpp"

namespace cbatch {

// Prints the problems (then returns 1) or the merged summary; writes summary_path when not empty.
// Returns the exit status: 0 all requests ok, 2 some error lines, 1 the shards do not cover the input.
int merge_and_report(const MergeSources& sources, const std::string& output, const std::string& summary_path,
                     bool quiet);

}  // namespace cbatch
