// Argument surgery on the parent's command line; no knowledge of run's other options is needed.
#include "engine/scale/child_args.hpp"

#include <array>
#include <string_view>

namespace cbatch {
namespace {

// Options of run that each child gets its own value of (all take one value).
constexpr std::array<std::string_view, 8> kPerChildOptions = {
    "--data-parallel-size", "--output", "--summary", "--trace", "--threads", "--shard", "--num-shards", "-o"};

// How many arguments starting at `arg` belong to a per-child option (0: not one).
int per_child_span(std::string_view arg) {
  if (arg == "--quiet") return 1;
  for (std::string_view name : kPerChildOptions) {
    if (arg == name) return 2;
    if (arg.starts_with(name) && arg.size() > name.size()) {
      if (arg[name.size()] == '=') return 1;           // --opt=V
      if (name == "-o") return 1;                      // -oV
    }
  }
  return 0;
}

}  // namespace

std::vector<std::string> child_arguments(const std::vector<std::string>& parent_args, const ChildPlan& plan) {
  std::vector<std::string> args;
  for (size_t i = 0; i < parent_args.size();) {
    if (parent_args[i] == "--") {  // positionals only from here on
      args.insert(args.end(), parent_args.begin() + static_cast<std::ptrdiff_t>(i), parent_args.end());
      break;
    }
    const int span = per_child_span(parent_args[i]);
    if (span == 0) args.push_back(parent_args[i]);
    i += static_cast<size_t>(span == 0 ? 1 : span);
  }
  const std::vector<std::string> own = {"--shard", plan.shard.name(), "-o", plan.output, "--summary", plan.summary, "--quiet"};
  // Before a "--", so that they stay options.
  auto at = args.begin();
  while (at != args.end() && *at != "--") ++at;
  at = args.insert(at, own.begin(), own.end()) + static_cast<std::ptrdiff_t>(own.size());
  if (!plan.trace.empty()) at = args.insert(at, {"--trace", plan.trace}) + 2;
  if (plan.threads > 0) args.insert(at, {"--threads", std::to_string(plan.threads)});
  return args;
}

std::string shard_file_path(const std::string& path, const ShardSpec& shard) {
  const std::string tag = ".shard-" + std::to_string(shard.index) + "-of-" + std::to_string(shard.count);
  const std::string suffix = ".jsonl";
  if (path.size() > suffix.size() && path.ends_with(suffix)) {
    return path.substr(0, path.size() - suffix.size()) + tag + suffix;
  }
  return path + tag;
}

}  // namespace cbatch
