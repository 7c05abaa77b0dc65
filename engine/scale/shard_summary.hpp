// The summaries of a sharded run's tasks, read back for `merge`: which shard of which input each task
// answered, and its counters, merged into one summary (counters summed; wall time the longest task's,
// since the tasks run side by side; budget use and padding weighted by steps). Requests, tokens and
// latency percentiles are not taken from here but recounted from the merged output lines, because a
// resumed task's summary covers only its last run.
#pragma once
#include <string>
#include <vector>

#include "engine/core/run_stats.hpp"
#include "engine/io/summary_format.hpp"

namespace cbatch {

struct ShardSummary {
  std::string path;
  ShardProvenance provenance;
  std::string mode;
  std::string device;
  RunSummary run;  // steps, wall_s, preemptions, cached_tokens, ... as the task recorded them
};

// "part-3.jsonl" -> "part-3.summary.json" (other names: NAME.summary.json).
std::string default_summary_path(const std::string& output);

// Throws cbatch::Error naming the file and the field when it is unreadable or has no "shard" object.
ShardSummary read_shard_summary(const std::string& path);

// The engine counters of the tasks' summaries merged (requests, tokens, percentiles left at zero).
RunSummary merge_run_counters(const std::vector<ShardSummary>& summaries);

}  // namespace cbatch
