// `cbatch merge OUT.jsonl SHARD.jsonl... --input PROMPTS.jsonl`: the shards of a sharded run (--shard,
// --data-parallel-size, a Slurm array, a Kubernetes Indexed Job) into one output in input order, after
// checking that they cover the input exactly (engine/scale/shard_merge.hpp). Exit status 0 when every
// request succeeded, 2 when the merged output holds error lines, 1 when the shards do not cover the input.
#include <memory>

#include "cmd/commands.hpp"
#include "cmd/merge_shards.hpp"
#include "engine/scale/shard_summary.hpp"

namespace cbatch {
namespace {

struct MergeOptions {
  std::string output;
  std::vector<std::string> shards;
  std::string input;
  std::vector<std::string> summaries;
  std::string summary;
  bool quiet = false;
};

int run_merge(MergeOptions o) {
  MergeSources sources{o.input, o.shards, o.summaries};
  if (sources.summaries.empty()) {
    for (const std::string& shard : o.shards) sources.summaries.push_back(default_summary_path(shard));
  }
  return merge_and_report(sources, o.output, o.summary, o.quiet);
}

}  // namespace

Command add_merge_command(CLI::App& app) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* sub = app.add_subcommand("merge", "merge the output files of a sharded run into one, in input order");
  sub->add_option("output", options->output, "the merged JSONL output file")->required();
  sub->add_option("shards", options->shards, "the shards' output files (each with its summary)")->required();
  sub->add_option("--input", options->input, "the prompts file the shards answered")->required();
  sub->add_option("--summaries", options->summaries,
                  "the shards' summaries, in the order of the shard files (default: SHARD.summary.json beside "
                  "each SHARD.jsonl)")
      ->expected(1, -1);
  sub->add_option("--summary", options->summary, "write the merged summary as JSON to this file");
  sub->add_flag("--quiet", options->quiet, "print only problems");
  return {sub, [options] { return run_merge(*options); }};
}

}  // namespace cbatch
