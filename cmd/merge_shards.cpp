// merge_and_report: engine/scale/shard_merge.hpp plus what the user sees (problems or the summary).
#include "cmd/merge_shards.hpp"

#include <chrono>
#include <cstdio>

#include "engine/base/error.hpp"
#include "engine/base/file_type.hpp"
#include "engine/base/text_output.hpp"
#include "engine/io/summary_format.hpp"

namespace cbatch {

int merge_and_report(const MergeSources& sources, const std::string& output, const std::string& summary_path,
                     bool quiet) {
  // However spelled (a symlink, ./OUT): the output replaces its file, so it must be none of the ones read.
  if (output == sources.input || is_same_regular_file(output, sources.input)) {
    throw Error("merge: the output file must differ from the input file");
  }
  for (const std::string& shard : sources.shards) {
    if (shard == output || is_same_regular_file(output, shard)) {
      throw Error("merge: the output file '" + output + "' is also given as a shard");
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const MergeResult result = merge_shards(sources, output);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result.problems.empty()) {
    std::fprintf(stderr, "cbatch merge: the %zu shard files do not cover '%s' exactly; nothing was written:\n",
                 sources.shards.size(), sources.input.c_str());
    for (const std::string& problem : result.problems) std::fprintf(stderr, "  %s\n", problem.c_str());
    return 1;
  }
  if (!quiet) {
    std::fprintf(stderr, "[cbatch] merged %d shards: %lld lines into %s in %.2f s", result.num_shards,
                 static_cast<long long>(result.lines_written), output.c_str(), seconds);
    if (result.duplicate_ids > 0) {
      std::fprintf(stderr, " (%lld lines reuse an earlier line's id: duplicate-id error lines)",
                   static_cast<long long>(result.duplicate_ids));
    }
    std::fprintf(stderr, "\n%s", format_summary_text(result.summary).c_str());
  }
  if (!summary_path.empty()) write_text_file(summary_path, format_summary_json(result.summary, result.mode, result.device));
  return result.summary.requests_failed > 0 ? 2 : 0;
}

}  // namespace cbatch
