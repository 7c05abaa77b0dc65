// merge_shards: summaries checked as a set, the input indexed, the shard files scanned into slots,
// coverage checked; then the lines copied in input order from the memory-mapped shard files.
#include "engine/scale/shard_merge.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>

#include "engine/base/error.hpp"
#include "engine/base/file_type.hpp"
#include "engine/io/input_fingerprint.hpp"
#include "engine/base/mapped_file.hpp"
#include "engine/base/replaced_file.hpp"
#include "engine/scale/input_index.hpp"
#include "engine/scale/shard_scan.hpp"
#include "engine/scale/shard_summary.hpp"

namespace cbatch {
namespace {

std::vector<std::optional<ShardSummary>> load_summaries(const MergeSources& s, std::vector<std::string>& problems) {
  std::vector<std::optional<ShardSummary>> summaries;
  for (size_t i = 0; i < s.summaries.size(); ++i) {
    try {
      summaries.push_back(read_shard_summary(s.summaries[i]));
    } catch (const Error& e) {
      problems.push_back("'" + s.shards[i] + "': its summary cannot be used (" + e.what() + ")");
      summaries.emplace_back();
    }
  }
  return summaries;
}

// Every summary: the same shard count, the input's fingerprint; every shard index once.
void check_summary_set(const MergeSources& s, const std::vector<std::optional<ShardSummary>>& summaries,
                       const InputFingerprint& input, int& num_shards, std::vector<std::string>& problems) {
  std::vector<int> file_of_index;
  for (size_t i = 0; i < summaries.size(); ++i) {
    if (!summaries[i]) continue;
    const ShardProvenance& p = summaries[i]->provenance;
    const std::string name = "'" + s.shards[i] + "' (shard " + p.shard.name() + ")";
    if (num_shards == 0) {
      num_shards = p.shard.count;
      file_of_index.assign(static_cast<size_t>(num_shards), -1);
    }
    if (p.fingerprint != input) {
      problems.push_back(name + " is a shard of another input: its summary records '" + p.input + "' (" +
                         p.fingerprint.text() + "), but --input '" + s.input + "' is " + input.text());
    }
    if (p.shard.count != num_shards) {
      problems.push_back(name + " splits the input in " + std::to_string(p.shard.count) + ", the first shard in " +
                         std::to_string(num_shards));
      continue;
    }
    int& seen = file_of_index[static_cast<size_t>(p.shard.index)];
    if (seen >= 0) problems.push_back(name + " is given twice: also as '" + s.shards[static_cast<size_t>(seen)] + "'");
    seen = static_cast<int>(i);
  }
  for (size_t k = 0; k < file_of_index.size(); ++k) {
    if (file_of_index[k] < 0) {
      problems.push_back("shard " + ShardSpec{static_cast<int>(k), num_shards}.name() + " is missing: no file given");
    }
  }
}

// Input lines without an output line, listed per shard.
void check_coverage(const InputIndex& index, const ShardScan& scan, int num_shards, std::vector<std::string>& problems) {
  const int groups = num_shards > 0 ? num_shards : 1;
  std::vector<std::vector<int64_t>> missing(static_cast<size_t>(groups));
  for (int64_t line = 1; line <= index.num_lines; ++line) {
    if (index.has_line[static_cast<size_t>(line)] != 0 && scan.slots[static_cast<size_t>(line)].file < 0) {
      missing[static_cast<size_t>(line % groups)].push_back(line);
    }
  }
  for (int k = 0; k < groups; ++k) {
    const std::vector<int64_t>& lines = missing[static_cast<size_t>(k)];
    if (lines.empty()) continue;
    const std::string of = num_shards > 0 ? " of shard " + ShardSpec{k, num_shards}.name() : std::string();
    problems.push_back(std::to_string(lines.size()) + " input lines" + of + " have no output line: lines " + list_lines(lines));
  }
}

void report_answered_twice(const MergeSources& s, const ShardScan& scan, std::vector<std::string>& problems) {
  for (const auto& [files, unsorted] : scan.answered_twice) {
    std::vector<int64_t> lines = unsorted;
    std::sort(lines.begin(), lines.end());
    problems.push_back(std::to_string(lines.size()) + " input lines are answered twice, in '" +
                       s.shards[static_cast<size_t>(files.first)] + "' and in '" +
                       s.shards[static_cast<size_t>(files.second)] + "': lines " + list_lines(lines));
  }
}

struct WrittenLines {
  int64_t results = 0;
  int64_t errors = 0;
};

WrittenLines write_merged(const MergeSources& s, const InputIndex& index, const ShardScan& scan, const std::string& output) {
  std::vector<std::unique_ptr<MappedFile>> files;
  for (const std::string& path : s.shards) files.push_back(std::make_unique<MappedFile>(path));
  ReplacedFile out(output);
  WrittenLines written;
  for (int64_t line = 1; line <= index.num_lines; ++line) {
    if (index.has_line[static_cast<size_t>(line)] == 0) continue;
    const auto duplicate = index.duplicate_error_lines.find(line);
    if (duplicate != index.duplicate_error_lines.end()) {
      out.append(duplicate->second);
      ++written.errors;
    } else {
      const OutputSlot& slot = scan.slots[static_cast<size_t>(line)];
      const MappedFile& file = *files[static_cast<size_t>(slot.file)];
      out.append({reinterpret_cast<const char*>(file.data()) + slot.offset, static_cast<size_t>(slot.length)});
      ++(slot.is_error ? written.errors : written.results);
    }
  }
  out.commit();
  return written;
}

// Requests, tokens and latencies counted from the merged lines; the engine counters from the summaries.
RunSummary merged_summary(const std::vector<std::optional<ShardSummary>>& summaries, const ShardScan& scan,
                          const WrittenLines& written) {
  std::vector<ShardSummary> present;
  for (const auto& s : summaries) {
    if (s) present.push_back(*s);
  }
  RunSummary m = merge_run_counters(present);
  m.requests_ok = written.results;
  m.requests_failed = written.errors;
  m.prompt_tokens = scan.prompt_tokens;
  m.output_tokens = scan.completion_tokens;
  m.ttft_ms_p50 = percentile(scan.ttft_ms, 50);
  m.ttft_ms_p99 = percentile(scan.ttft_ms, 99);
  m.e2e_ms_p50 = percentile(scan.e2e_ms, 50);
  m.e2e_ms_p99 = percentile(scan.e2e_ms, 99);
  return m;
}

}  // namespace

MergeResult merge_shards(const MergeSources& s, const std::string& output) {
  if (s.shards.empty()) throw Error("merge: no shard files given");
  if (s.summaries.size() != s.shards.size()) {
    throw Error("merge: " + std::to_string(s.shards.size()) + " shard files but " + std::to_string(s.summaries.size()) +
                " summaries: give one summary per shard, in the same order");
  }
  // Before any reading: an output that cannot be replaced, and inputs that cannot be read twice (a scan,
  // then the copy or the index), are refused at once.
  replacement_target(output);
  for (const std::string& shard : s.shards) {
    require_regular_file(shard, "merge reads each shard file twice (a scan, then the copy), so it must be a regular file");
  }
  MergeResult result;
  const auto summaries = load_summaries(s, result.problems);
  check_summary_set(s, summaries, fingerprint_file(s.input), result.num_shards, result.problems);
  const InputIndex index = index_input(s.input);
  ShardScanner scanner(index, s.shards);
  for (size_t i = 0; i < s.shards.size(); ++i) {
    scanner.scan(static_cast<int>(i), summaries[i] ? summaries[i]->provenance.shard : ShardSpec{0, 0});
  }
  const ShardScan& scan = scanner.scan_result();
  result.problems.insert(result.problems.end(), scan.problems.begin(), scan.problems.end());
  report_answered_twice(s, scan, result.problems);
  check_coverage(index, scan, result.num_shards, result.problems);
  if (!result.problems.empty()) return result;
  const WrittenLines written = write_merged(s, index, scan, output);
  result.summary = merged_summary(summaries, scan, written);
  result.mode = summaries[0]->mode;
  result.device = summaries[0]->device;
  result.lines_written = written.results + written.errors;
  result.duplicate_ids = static_cast<int64_t>(index.duplicate_error_lines.size());
  return result;
}

}  // namespace cbatch
