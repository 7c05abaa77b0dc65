// Shard arithmetic (--shard I/N and auto from Slurm / Kubernetes variables), the input fingerprint, and
// the children's command lines of --data-parallel-size.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/io/input_fingerprint.hpp"
#include "fifo.hpp"
#include "engine/io/shard_spec.hpp"
#include "engine/scale/child_args.hpp"
#include "temp_file.hpp"

using cbatch::ShardSpec;

namespace {

cbatch::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cbatch::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every line belongs to exactly one shard, by L mod N") {
  for (int count : {1, 2, 3, 7}) {
    for (int64_t line = 1; line <= 50; ++line) {
      int owners = 0;
      int owner = -1;
      for (int i = 0; i < count; ++i) {
        if (ShardSpec{i, count}.owns(line)) {
          ++owners;
          owner = i;
        }
      }
      CHECK(owners == 1);
      CHECK(owner == line % count);
    }
  }
  CHECK(ShardSpec{1, 3}.name() == "1/3");
}

TEST_CASE("--shard I/N parses 0-based indexes and names bad values") {
  const ShardSpec s = cbatch::parse_shard_spec("2/7");
  CHECK(s.index == 2);
  CHECK(s.count == 7);
  CHECK(cbatch::parse_shard_spec("0/1").is_whole());
  CHECK(error_of([] { cbatch::parse_shard_spec("3/3"); }).find("0..2, not 3") != std::string::npos);
  CHECK(error_of([] { cbatch::parse_shard_spec("0/0"); }).find("not 0") != std::string::npos);
  CHECK(error_of([] { cbatch::parse_shard_spec("-1/2"); }).find("not -1") != std::string::npos);
  for (const char* bad : {"1", "1/", "/2", "a/2", "1/2x", "1/2/3", ""}) {
    CAPTURE(bad);
    CHECK(error_of([bad] { cbatch::parse_shard_spec(bad); }).find("expected I/N") != std::string::npos);
  }
}

TEST_CASE("--shard auto reads Slurm arrays and Kubernetes indexed jobs") {
  const ShardSpec slurm = cbatch::shard_from_environment(env_of({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}), 0);
  CHECK(slurm.index == 3);
  CHECK(slurm.count == 4);
  // --array=1-4 and --array=0-6:2 number their tasks from the minimum, by the step.
  const ShardSpec from_one = cbatch::shard_from_environment(
      env_of({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "1"}}), 0);
  CHECK(from_one.index == 0);
  const ShardSpec stepped = cbatch::shard_from_environment(
      env_of({{"SLURM_ARRAY_TASK_ID", "6"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "0"},
              {"SLURM_ARRAY_TASK_STEP", "2"}}), 0);
  CHECK(stepped.index == 3);
  const ShardSpec k8s = cbatch::shard_from_environment(env_of({{"JOB_COMPLETION_INDEX", "5"}}), 8);
  CHECK(k8s.index == 5);
  CHECK(k8s.count == 8);
  CHECK(cbatch::resolve_shard("auto", 8, env_of({{"JOB_COMPLETION_INDEX", "0"}})).count == 8);
  CHECK(cbatch::resolve_shard("1/2", 0, env_of({})).index == 1);
}

TEST_CASE("--shard auto: missing or bad variables are errors naming them") {
  CHECK(error_of([] { cbatch::shard_from_environment(env_of({}), 0); }).find("neither SLURM_ARRAY_TASK_ID") != std::string::npos);
  CHECK(error_of([] { cbatch::shard_from_environment(env_of({{"JOB_COMPLETION_INDEX", "1"}}), 0); })
            .find("--num-shards") != std::string::npos);
  CHECK(error_of([] { cbatch::shard_from_environment(env_of({{"JOB_COMPLETION_INDEX", "8"}}), 8); })
            .find("JOB_COMPLETION_INDEX=8") != std::string::npos);
  CHECK(error_of([] { cbatch::shard_from_environment(env_of({{"JOB_COMPLETION_INDEX", "x"}}), 8); })
            .find("JOB_COMPLETION_INDEX='x' is not an integer") != std::string::npos);
  CHECK(error_of([] { cbatch::shard_from_environment(env_of({{"SLURM_ARRAY_TASK_ID", "1"}}), 0); })
            .find("SLURM_ARRAY_TASK_COUNT is not") != std::string::npos);
  CHECK(error_of([] {
          cbatch::shard_from_environment(env_of({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}), 3);
        }).find("--num-shards 3 differs from SLURM_ARRAY_TASK_COUNT=4") != std::string::npos);
  CHECK(error_of([] {
          cbatch::shard_from_environment(env_of({{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}), 0);
        }).find("0..3, not 4") != std::string::npos);
  CHECK(error_of([] { cbatch::resolve_shard("1/2", 2, env_of({})); }).find("--num-shards goes with --shard auto") !=
        std::string::npos);
}

TEST_CASE("the input fingerprint: size and a hash of every byte, streamed like in memory") {
  std::string text;
  for (int i = 0; i < 300000; ++i) text += "{\"id\": " + std::to_string(i) + "}\n";  // several 1 MiB reads
  const cbatch::test::TempFile file(text);
  const cbatch::InputFingerprint whole = cbatch::fingerprint_file(file.path());
  CHECK(whole.bytes == static_cast<int64_t>(text.size()));
  CHECK(whole.hash.size() == 32);
  CHECK(whole == cbatch::fingerprint_bytes(text));
  std::string changed = text;
  changed[text.size() / 2] ^= 1;  // one bit anywhere changes it
  CHECK(cbatch::fingerprint_bytes(changed).hash != whole.hash);
  CHECK(cbatch::fingerprint_bytes(text + "\n").hash != whole.hash);
  CHECK(cbatch::fingerprint_bytes("ab").hash != cbatch::fingerprint_bytes(std::string("ab\0", 3)).hash);
  CHECK(error_of([] { cbatch::fingerprint_file("-"); }).find("standard input") != std::string::npos);
}

TEST_CASE("the input fingerprint: a named pipe is refused, not read (its lines would be gone for the run)") {
  const cbatch::test::TempFifo fifo;
  std::string message;
  CHECK_MESSAGE(cbatch::test::finishes_within(5, [&] { message = error_of([&] { cbatch::fingerprint_file(fifo.path()); }); },
                                              [&] { fifo.release_readers(); }),
                "fingerprinting a named pipe waited for a writer");
  CHECK(message.find("'" + fifo.path() + "' is a named pipe (FIFO), not a regular file") != std::string::npos);
}

TEST_CASE("data-parallel children: per-child options replaced in every spelling, the rest passed on") {
  const std::vector<std::string> parent = {"run", "in.jsonl", "-o", "out.jsonl", "--data-parallel-size=2", "--model",
                                           "m.gguf", "--threads", "4", "--summary=s.json", "--resume", "--quiet",
                                           "--ordered", "--trace", "t.jsonl", "-ox.jsonl"};
  const cbatch::ChildPlan plan{{1, 2}, "out.shard-1-of-2.jsonl", "out.shard-1-of-2.summary.json", "t.shard-1-of-2.jsonl", 2};
  const std::vector<std::string> expected = {"run", "in.jsonl", "--model", "m.gguf", "--resume", "--ordered",
                                             "--shard", "1/2", "-o", "out.shard-1-of-2.jsonl", "--summary",
                                             "out.shard-1-of-2.summary.json", "--quiet", "--trace",
                                             "t.shard-1-of-2.jsonl", "--threads", "2"};
  CHECK(cbatch::child_arguments(parent, plan) == expected);
  // After "--" everything is a positional: the child's options go before it.
  const std::vector<std::string> dashed = cbatch::child_arguments({"run", "--", "-o"}, {{0, 2}, "a", "b", "", 0});
  CHECK(dashed == std::vector<std::string>{"run", "--shard", "0/2", "-o", "a", "--summary", "b", "--quiet", "--", "-o"});
  CHECK(cbatch::shard_file_path("dir/out.jsonl", {1, 4}) == "dir/out.shard-1-of-4.jsonl");
  CHECK(cbatch::shard_file_path("out", {0, 2}) == "out.shard-0-of-2");
}
