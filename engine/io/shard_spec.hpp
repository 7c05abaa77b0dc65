// Which input lines one task of a sharded run answers. Shard I of N (I 0-based, as SLURM_ARRAY_TASK_ID
// and JOB_COMPLETION_INDEX count) keeps the lines whose 1-based line number L has L mod N == I, blank
// lines included in the numbering: a fixed rule of the line number alone, so every task agrees on the
// split without talking to the others, whatever the lines hold. N = 1 is the whole input.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace cbatch {

struct ShardSpec {
  int index = 0;  // I, in [0, count)
  int count = 1;  // N >= 1

  bool owns(int64_t line_no) const { return line_no % count == index; }
  bool is_whole() const { return count == 1; }
  std::string name() const { return std::to_string(index) + "/" + std::to_string(count); }
};

inline constexpr int kMaxShards = 1 << 20;

// "I/N"; throws cbatch::Error naming the value and the rule it breaks.
ShardSpec parse_shard_spec(const std::string& text);

// Reads an environment variable (std::getenv in the program, a map in tests); nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;
EnvLookup process_environment();

// --shard auto: SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (relative to SLURM_ARRAY_TASK_MIN and
// SLURM_ARRAY_TASK_STEP, so --array=1-8 or 0-14:2 work too), else JOB_COMPLETION_INDEX with num_shards
// (Kubernetes does not export the count). num_shards 0 = not given; when given with Slurm it must equal
// the array's count. Throws cbatch::Error naming the variables and values when none fits.
ShardSpec shard_from_environment(const EnvLookup& env, int num_shards);

// The value of --shard (a spec, or "auto"), with --num-shards.
ShardSpec resolve_shard(const std::string& shard, int num_shards, const EnvLookup& env);

}  // namespace cbatch
