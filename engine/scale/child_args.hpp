// The command lines of `run --data-parallel-size D`'s children: the parent's own arguments with the
// options that differ per child taken out (the output, summary, trace, shard, thread count, quiet and
// the data-parallel size itself, in every spelling CLI11 accepts: "--opt V", "--opt=V", "-o V", "-oV"),
// then the child's own appended. Everything else (model, engine flags, --resume, --ordered, ...) is
// passed through unchanged, so options added to run later reach the children without a change here.
#pragma once
#include <string>
#include <vector>

#include "engine/io/shard_spec.hpp"

namespace cbatch {

struct ChildPlan {
  ShardSpec shard;
  std::string output;
  std::string summary;
  std::string trace;  // "" = none
  int threads = 0;    // 0 = leave --threads out
};

// parent_args: the parent's argv without argv[0].
std::vector<std::string> child_arguments(const std::vector<std::string>& parent_args, const ChildPlan& plan);

// "dir/out.jsonl" -> "dir/out.shard-1-of-4.jsonl" (NAME without .jsonl: NAME.shard-1-of-4).
std::string shard_file_path(const std::string& path, const ShardSpec& shard);

}  // namespace cbatch
