// merge_shards on hand-made shards of a small input (results, an invalid line, a blank line, an id used
// again within one shard and across shards): the merged output in input order, with the duplicate-id
// error lines a single process writes; and the problems it refuses, naming files and lines.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/input_fingerprint.hpp"
#include "engine/io/summary_format.hpp"
#include "engine/scale/shard_merge.hpp"
#include "engine/scale/shard_scan.hpp"
#include "engine/scale/shard_summary.hpp"
#include "temp_file.hpp"

using cbatch::test::TempFile;

namespace {

// Lines 1, 3, 5 belong to shard 1 of 2; lines 4 and 6 to shard 0; line 2 is blank.
const std::string kInput =
    R"({"id": "a", "prompt": "x"})" "\n"
    "\n"
    R"({"id": "b", "prompt": "y"})" "\n"
    "not json\n"
    R"({"id": "a", "prompt": "z"})" "\n"
    R"({"id": "b", "prompt": "w"})" "\n";

std::string result(const std::string& id, int ttft) {
  return R"({"id": ")" + id + R"(", "text": "t", "output_token_ids": [5], "finish_reason": "length", "prompt_tokens": 3, )"
         R"("completion_tokens": 1, "cached_tokens": 0, "metrics": {"ttft_ms": )" + std::to_string(ttft) +
         R"(, "e2e_ms": 9, "first_step": 1, "finish_step": 2}})" "\n";
}

std::string error(const std::string& id, int line, const std::string& message) {
  return R"({"id": )" + id + R"(, "line": )" + std::to_string(line) +
         R"(, "error": {"type": "invalid_request", "message": "line )" + std::to_string(line) + ": " + message + "\"}}\n";
}

const std::string kBadJson = "invalid JSON: x";  // the shards' text is copied as is, whatever it says
const std::string kShard1 = result("b", 20) + result("a", 10) +
                            error("\"a\"", 5, "duplicate id \\\"a\\\" (first used on line 1): every line needs its own id");
const std::string kShard0 = error("4", 4, kBadJson) + result("b", 30);

std::string summary_of(int index, const std::string& input, const std::string& output) {
  cbatch::RunSummary s;
  s.steps = 4 + index;
  s.wall_s = 1.0 + index;
  // What each shard held in memory (a hybrid model with a full and a windowed KV group).
  s.kv_block_bytes = 4096;
  s.peak_num_seqs = 3 - index;
  s.kv_group_windows = {0, 512};
  s.peak_kv_group_blocks = {10 + 5 * index, 7 - 3 * index};
  s.weight_bytes = 1000;
  s.state_slots_total = 8;
  s.peak_state_slots = 2 + 4 * index;
  s.state_slot_bytes = 640;
  s.state_snapshots_total = 4;
  s.state_snapshots_saved = 3 + index;
  s.state_snapshots_restored = 1;
  s.prefix_hits = 2;
  cbatch::ShardProvenance p{{index, 2}, input, cbatch::fingerprint_file(input), output};
  return cbatch::format_summary_json(s, "continuous", "cpu", &p);
}

struct Shards {
  TempFile input{kInput};
  TempFile shard0{kShard0};
  TempFile shard1{kShard1};
  TempFile summary0{""};
  TempFile summary1{""};
  TempFile out{""};
  Shards() {
    summary0.write(summary_of(0, input.path(), shard0.path()));
    summary1.write(summary_of(1, input.path(), shard1.path()));
  }
  cbatch::MergeResult merge(std::vector<const TempFile*> shards, std::vector<const TempFile*> summaries) {
    cbatch::MergeSources s;
    s.input = input.path();
    for (const TempFile* f : shards) s.shards.push_back(f->path());
    for (const TempFile* f : summaries) s.summaries.push_back(f->path());
    return cbatch::merge_shards(s, out.path());
  }
};

bool has_problem(const cbatch::MergeResult& r, const std::string& text) {
  for (const std::string& p : r.problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string problems_of(const cbatch::MergeResult& r) {
  std::string all;
  for (const std::string& p : r.problems) all += p + "\n";
  return all;
}

}  // namespace

TEST_CASE("merge: input order, shard lines byte for byte, duplicate ids across shards as a single process") {
  Shards s;
  const cbatch::MergeResult r = s.merge({&s.shard0, &s.shard1}, {&s.summary0, &s.summary1});
  INFO(problems_of(r));
  REQUIRE(r.problems.empty());
  const std::string dup_b = error("\"b\"", 6, "duplicate id \\\"b\\\" (first used on line 3): every line needs its own id");
  const std::string expected = result("a", 10) + result("b", 20) + error("4", 4, kBadJson) +
                               error("\"a\"", 5, "duplicate id \\\"a\\\" (first used on line 1): every line needs its own id") +
                               dup_b;
  CHECK(s.out.read() == expected);
  CHECK(r.lines_written == 5);
  CHECK(r.duplicate_ids == 2);
  CHECK(r.summary.requests_ok == 2);
  CHECK(r.summary.requests_failed == 3);
  CHECK(r.summary.steps == 9);          // summed
  CHECK(r.summary.wall_s == 2.0);       // the longest task
  CHECK(r.summary.prompt_tokens == 9);  // from the three result lines the shards wrote
  CHECK(r.summary.ttft_ms_p99 == 30);
  CHECK(r.summary.ttft_ms_p50 == 20);
}

TEST_CASE("merge: the memory figures (KV groups, state slots, weights) are the largest shard's") {
  Shards s;
  const cbatch::MergeResult r = s.merge({&s.shard0, &s.shard1}, {&s.summary0, &s.summary1});
  REQUIRE_MESSAGE(r.problems.empty(), problems_of(r));
  CHECK(r.summary.kv_block_bytes == 4096);
  CHECK(r.summary.peak_num_seqs == 3);
  CHECK(r.summary.kv_group_windows == std::vector<int>{0, 512});
  CHECK(r.summary.peak_kv_group_blocks == std::vector<int>{15, 7});  // group by group
  CHECK(r.summary.weight_bytes == 1000);
  CHECK(r.summary.state_slots_total == 8);
  CHECK(r.summary.peak_state_slots == 6);
  CHECK(r.summary.state_slot_bytes == 640);
  CHECK(r.summary.state_snapshots_total == 4);
  CHECK(r.summary.state_snapshots_saved == 7);  // summed
  CHECK(r.summary.state_snapshots_restored == 2);
  CHECK(r.summary.prefix_hits == 4);
  const std::string json = cbatch::format_summary_json(r.summary, "continuous", "cpu", nullptr);
  CHECK(json.find("\"window\": 512, \"peak_blocks\": 7}") != std::string::npos);
  CHECK(json.find("\"state_slot_bytes\": 640") != std::string::npos);
}

TEST_CASE("merge refuses a missing shard, naming its lines") {
  Shards s;
  const cbatch::MergeResult r = s.merge({&s.shard1}, {&s.summary1});
  CHECK(has_problem(r, "shard 0/2 is missing"));
  CHECK(has_problem(r, "2 input lines of shard 0/2 have no output line: lines 4, 6"));
  CHECK(s.out.read().empty());
}

TEST_CASE("merge refuses a shard given twice, naming the lines answered twice") {
  Shards s;
  TempFile copy(kShard1);
  const cbatch::MergeResult r = s.merge({&s.shard0, &s.shard1, &copy}, {&s.summary0, &s.summary1, &s.summary1});
  CHECK(has_problem(r, "(shard 1/2) is given twice"));
  CHECK(has_problem(r, "3 input lines are answered twice, in '" + s.shard1.path() + "' and in '" + copy.path() +
                           "': lines 1, 3, 5"));
}

TEST_CASE("merge refuses a shard of another input by its summary's fingerprint") {
  Shards s;
  TempFile other(kInput + "\n" R"({"id": "c", "prompt": "v"})" "\n");
  s.summary0.write(summary_of(0, other.path(), s.shard0.path()));
  const cbatch::MergeResult r = s.merge({&s.shard0, &s.shard1}, {&s.summary0, &s.summary1});
  CHECK(has_problem(r, "'" + s.shard0.path() + "' (shard 0/2) is a shard of another input"));
  CHECK(r.problems.size() == 1);
}

TEST_CASE("merge refuses a torn last line, a foreign line and lines that are not output lines") {
  Shards s;
  s.shard0.write(error("4", 4, kBadJson) + result("b", 30).substr(0, 20));  // killed while writing line 6's result
  s.shard1.write(kShard1 + "garbage\n" + error("4", 4, kBadJson));
  const cbatch::MergeResult r = s.merge({&s.shard0, &s.shard1}, {&s.summary0, &s.summary1});
  INFO(problems_of(r));
  CHECK(has_problem(r, "its last line (line 2) is torn"));
  CHECK(has_problem(r, "1 input lines of shard 0/2 have no output line: lines 6"));
  CHECK(has_problem(r, "lines 4 are not cbatch output lines"));
  CHECK(has_problem(r, "answers input lines 4, which belong to other shards than 1/2"));
}

TEST_CASE("merge: a summary that is missing or not a shard's is a problem naming the file") {
  Shards s;
  s.summary1.write("{\"mode\": \"continuous\"}\n");
  const cbatch::MergeResult r = s.merge({&s.shard0, &s.shard1}, {&s.summary0, &s.summary1});
  CHECK(has_problem(r, "'" + s.shard1.path() + "': its summary cannot be used"));
  CHECK(has_problem(r, "shard 1/2 is missing"));
}

TEST_CASE("merge's messages list at most 8 lines, then a count; summaries sit beside their shard files") {
  CHECK(cbatch::list_lines({3, 6, 9}) == "3, 6, 9");
  CHECK(cbatch::list_lines({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) == "1, 2, 3, 4, 5, 6, 7, 8 and 2 more");
  CHECK(cbatch::default_summary_path("out/part-3.jsonl") == "out/part-3.summary.json");
  CHECK(cbatch::default_summary_path("part") == "part.summary.json");
}
