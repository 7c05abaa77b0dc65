// Parsing of --shard I/N and of the schedulers' variables; every bad value is an error naming it.
#include "engine/io/shard_spec.hpp"

#include <charconv>
#include <cstdlib>
#include <system_error>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t value = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (s.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

ShardSpec checked_spec(int64_t index, int64_t count, const std::string& what) {
  if (count < 1 || count > kMaxShards) {
    throw Error(what + ": the number of shards must be in 1.." + std::to_string(kMaxShards) + ", not " +
                std::to_string(count));
  }
  if (index < 0 || index >= count) {
    throw Error(what + ": the shard index is 0-based and must be in 0.." + std::to_string(count - 1) + ", not " +
                std::to_string(index));
  }
  return {static_cast<int>(index), static_cast<int>(count)};
}

// An environment variable that must be an integer when set.
std::optional<int64_t> env_int(const EnvLookup& env, const char* name) {
  const std::optional<std::string> text = env(name);
  if (!text) return std::nullopt;
  const std::optional<int64_t> value = parse_int(*text);
  if (!value) throw Error(std::string("--shard auto: ") + name + "='" + elide(*text) + "' is not an integer");
  return value;
}

ShardSpec slurm_shard(const EnvLookup& env, int64_t task_id, int num_shards) {
  const std::optional<int64_t> count = env_int(env, "SLURM_ARRAY_TASK_COUNT");
  if (!count) throw Error("--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not");
  const int64_t min = env_int(env, "SLURM_ARRAY_TASK_MIN").value_or(0);
  const int64_t step = env_int(env, "SLURM_ARRAY_TASK_STEP").value_or(1);
  if (step < 1 || task_id < min || (task_id - min) % step != 0) {
    throw Error("--shard auto: SLURM_ARRAY_TASK_ID=" + std::to_string(task_id) + " is not in the array " +
                std::to_string(min) + ".. step " + std::to_string(step));
  }
  if (num_shards > 0 && num_shards != *count) {
    throw Error("--num-shards " + std::to_string(num_shards) + " differs from SLURM_ARRAY_TASK_COUNT=" +
                std::to_string(*count));
  }
  return checked_spec((task_id - min) / step, *count,
                      "--shard auto (SLURM_ARRAY_TASK_ID=" + std::to_string(task_id) + ", SLURM_ARRAY_TASK_COUNT=" +
                          std::to_string(*count) + ")");
}

}  // namespace

ShardSpec parse_shard_spec(const std::string& text) {
  const size_t slash = text.find('/');
  const std::optional<int64_t> index = slash == std::string::npos ? std::nullopt : parse_int(std::string_view(text).substr(0, slash));
  const std::optional<int64_t> count = slash == std::string::npos ? std::nullopt : parse_int(std::string_view(text).substr(slash + 1));
  if (!index || !count) throw Error("--shard " + elide(text) + ": expected I/N (0-based index I of N shards, e.g. 0/4) or auto");
  return checked_spec(*index, *count, "--shard " + text);
}

EnvLookup process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

ShardSpec shard_from_environment(const EnvLookup& env, int num_shards) {
  if (const std::optional<int64_t> task_id = env_int(env, "SLURM_ARRAY_TASK_ID")) {
    return slurm_shard(env, *task_id, num_shards);
  }
  if (const std::optional<int64_t> index = env_int(env, "JOB_COMPLETION_INDEX")) {
    if (num_shards <= 0) {
      throw Error("--shard auto: JOB_COMPLETION_INDEX is set but Kubernetes does not export the number of "
                  "completions: pass --num-shards N (the Job's completions)");
    }
    return checked_spec(*index, num_shards, "--shard auto (JOB_COMPLETION_INDEX=" + std::to_string(*index) +
                                                ", --num-shards " + std::to_string(num_shards) + ")");
  }
  throw Error("--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a "
              "Kubernetes Indexed Job) is set; pass --shard I/N");
}

ShardSpec resolve_shard(const std::string& shard, int num_shards, const EnvLookup& env) {
  if (shard == "auto") return shard_from_environment(env, num_shards);
  if (num_shards > 0) throw Error("--num-shards goes with --shard auto (--shard " + shard + " names its count)");
  return parse_shard_spec(shard);
}

}  // namespace cbatch
