// `cbatch bench`: one workload through each mode on one loaded model and backend; a table on stdout,
// JSON with --json, and exit status 3 when --baseline shows a throughput regression.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include <unistd.h>

#include "cmd/commands.hpp"
#include "cmd/engine_options.hpp"
#include "cmd/run_plan.hpp"
#include "engine/bench/bench_dataset.hpp"
#include "engine/bench/bench_report.hpp"
#include "engine/bench/passages_synthetic.hpp"
#include "engine/core/engine.hpp"
#include "engine/base/error.hpp"
#include "engine/base/text_output.hpp"
#include "engine/io/jsonl_source.hpp"
#include "engine/io/progress.hpp"

namespace cbatch {
namespace {

struct BenchOptions {
  std::string dataset = "random";
  int num_prompts = 64;
  std::string input_len = "16:256";
  std::string output_len = "16:256";
  bool lengths_given = false;  // --input-len or --output-len was on the command line
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = -1;
  std::string modes = "continuous,static,sequential";
  std::string json;
  std::string baseline;
  double tolerance = 0.1;
  bool warmup = true;
  int prefix_len = 0;
  int num_prefixes = 1;
  int n = 1;
  std::string prefix_caching;   // "on", "off" or "both"; "" = --enable-prefix-caching's value
  EngineOptions engine;
};

// --shard: the generated requests are numbered like input lines (request i is line i + 1).
std::vector<SourceItem> load_items(const BenchOptions& o, const RunPlan& plan, const ModelPlan& model_plan,
                                   const Model& model, BenchReport& report) {
  WorkloadSpec& spec = report.workload;
  std::vector<SourceItem> items;
  const ShardSpec shard = plan.shard.value_or(ShardSpec{});
  if (is_generated_dataset(o.dataset)) {
    std::vector<Request> requests = make_generated_workload(o.dataset, spec, model);
    std::erase_if(requests, [&](const Request& r) { return !shard.owns(r.line); });
    const RealizedLengths lengths = realized_lengths(requests);
    report.mean_input_len = lengths.mean_input_len;
    report.mean_output_len = lengths.mean_output_len;
    for (Request& r : requests) {
      r.index = static_cast<int64_t>(items.size());
      items.emplace_back(std::move(r));
    }
    return items;
  }
  std::string path = o.dataset;
  if (o.dataset == "passages-synthetic") {  // written out, then read as any prompts file
    path = (std::filesystem::temp_directory_path() / ("cbatch-passages-" + std::to_string(::getpid()) + ".jsonl")).string();
    write_text_file(path, passages_synthetic_jsonl(o.num_prompts, plan.engine.seed));
  }
  JsonlRequestSource source(path, model, &model_plan.chat, plan.requests, plan.engine.seed);
  if (model_plan.rerank) source.set_rerank_format(&*model_plan.rerank);
  source.set_shard(shard);
  SourceItem item;
  while (static_cast<int>(items.size()) < o.num_prompts && source.next(item)) items.push_back(std::move(item));
  if (path != o.dataset) std::filesystem::remove(path);
  spec.num_prompts = static_cast<int>(items.size());
  return items;
}

RunSummary run_mode(const ModelPlan& model_plan, Mode mode, bool caching, const Model& model, Backend& backend,
                    std::vector<SourceItem> items, const DevicePeaks& peaks = {}) {
  EngineConfig config = model_plan.engine;
  config.scheduler.mode = mode;
  config.scheduler.enable_prefix_caching = caching;
  Engine engine(config, model, backend);
  const int64_t total = static_cast<int64_t>(items.size());
  VectorSource source(std::move(items));
  CollectingSink sink;
  ProgressReporter progress(!config.quiet);
  EngineHooks hooks;
  hooks.on_step = [&](const StepRecord& record) { progress.on_step(record, total); };
  hooks.peaks = peaks;
  const RunSummary summary = engine.run(source, sink, hooks);
  progress.finish();
  if (!sink.errors.empty()) {
    throw Error("bench: " + std::to_string(sink.errors.size()) + " requests failed, first: " + sink.errors[0].message);
  }
  return summary;
}

int run(const BenchOptions& o) {
  if (o.lengths_given && o.dataset != "random") {
    throw Error("--input-len / --output-len set the random dataset's lengths; --dataset " + o.dataset +
                " brings its own");
  }
  if (!o.engine.lora_modules.empty()) {
    throw Error("--lora-modules: bench's requests name no adapter; time a mixed file with `cbatch run` instead");
  }
  const RunPlan plan = resolve_run_plan(o.engine);
  Model model = load_model(plan.model);
  const ModelPlan model_plan = resolve_model_plan(plan, model);
  std::unique_ptr<Backend> backend = make_backend(plan, model_plan, model);
  BenchReport report;
  report.model = plan.model.path;
  report.device = backend->traits().device_name;
  report.dataset = o.dataset;
  report.workload.num_prompts = o.num_prompts;
  report.workload.input_len = parse_length_range(o.input_len, "--input-len");
  report.workload.output_len = parse_length_range(o.output_len, "--output-len");
  report.workload.seed = plan.engine.seed;
  report.workload.temperature = o.temperature;
  report.workload.top_p = o.top_p;
  report.workload.top_k = o.top_k;
  report.workload.prefix_len = o.prefix_len;
  report.workload.num_prefixes = o.num_prefixes;
  report.workload.n = o.n;
  const std::vector<SourceItem> items = load_items(o, plan, model_plan, model, report);

  std::vector<Mode> modes;
  std::stringstream list(o.modes);
  for (std::string name; std::getline(list, name, ',');) modes.push_back(parse_mode(name));
  if (modes.empty()) throw Error("--modes: give at least one of continuous, static, sequential");

  // Before any KV cache takes the memory the measurement needs.
  const DevicePeaks peaks = backend->measure_peaks();
  if (peaks.valid()) {
    report.peak_bytes_per_s = peaks.bytes_per_s;
    report.peak_flops_per_s = peaks.flops_per_s;
  }
  if (o.warmup) {  // first-use costs (allocation, library init) stay out of the figures
    std::vector<SourceItem> warm(items.begin(), items.begin() + std::min<size_t>(items.size(), 4));
    for (SourceItem& item : warm) {
      if (auto* r = std::get_if<Request>(&item)) r->sampling.max_tokens = std::min(r->sampling.max_tokens, 4);
    }
    run_mode(model_plan, Mode::kContinuous, false, model, *backend, warm);
  }
  const std::string caching =
      o.prefix_caching.empty() ? (plan.engine.scheduler.enable_prefix_caching ? "on" : "off") : o.prefix_caching;
  for (Mode mode : modes) {
    for (bool cache : {true, false}) {
      if ((cache && caching == "off") || (!cache && caching == "on")) continue;
      const std::string label = std::string(mode_name(mode)) + (caching == "both" && !cache ? "/no-cache" : "");
      if (!plan.engine.quiet) std::fprintf(stderr, "[cbatch] bench: %s mode\n", label.c_str());
      const double busy_before = backend->device_busy_seconds();
      const RunSummary summary = run_mode(model_plan, mode, cache, model, *backend, items, peaks);
      const double busy = backend->device_busy_seconds() - busy_before;
      report.results.push_back({label, cache, summary, peaks.valid() ? summary.roofline_fraction() : -1,
                                busy > 0 ? 1.0 - busy / summary.wall_s : -1});
    }
  }
  std::fputs(format_bench_table(report).c_str(), stdout);
  if (!o.json.empty()) write_text_file(o.json, format_bench_json(report));
  if (o.baseline.empty()) return 0;
  const auto regressions = compare_with_baseline(report, o.baseline, o.tolerance);
  for (const Regression& r : regressions) {
    std::fprintf(stderr, "cbatch: regression: %s mode %.1f output tok/s < baseline %.1f - %.0f%%\n", r.mode.c_str(),
                 r.tokens_per_s, r.baseline_tokens_per_s, o.tolerance * 100);
  }
  return regressions.empty() ? 0 : 3;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "measure throughput and latency of each scheduling mode");
  sub->add_option("--dataset", o->dataset,
                  "random, sharegpt-synthetic, sharegpt:FILE (a ShareGPT JSON file), passages-synthetic (embedding "
                  "lines of MS MARCO-like passages), or a JSONL prompts file");
  sub->add_option("--num-prompts", o->num_prompts, "requests in the workload")->check(CLI::Range(1, 10000000));
  CLI::Option* input_len =
      sub->add_option("--input-len", o->input_len, "prompt length A or range A:B (random dataset)");
  CLI::Option* output_len =
      sub->add_option("--output-len", o->output_len, "output length C or range C:D (random dataset, ignore_eos)");
  sub->add_option("--temperature", o->temperature, "sampling temperature of the random dataset (0: greedy)")
      ->check(CLI::Range(0.0f, 100.0f));
  sub->add_option("--top-p", o->top_p, "top_p of the random dataset")->check(CLI::Range(0.001f, 1.0f));
  sub->add_option("--top-k", o->top_k, "top_k of the random dataset (-1: off)")->check(CLI::Range(-1, 10000000));
  sub->add_option("--modes", o->modes, "comma-separated modes to run, in order");
  sub->add_option("--prefix-len", o->prefix_len, "tokens of a shared prefix before each random prompt")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--num-prefixes", o->num_prefixes, "distinct shared prefixes (prompt i gets prefix i mod K)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--n", o->n, "completions per prompt (random dataset)")->check(CLI::Range(1, kMaxSamplesPerRequest));
  sub->add_option("--prefix-caching", o->prefix_caching, "on, off, or both (each mode twice: '/no-cache' rows)")
      ->check(CLI::IsMember({"on", "off", "both"}));
  sub->add_option("--json", o->json, "write the results as JSON to this file");
  sub->add_option("--baseline", o->baseline, "bench JSON to compare output tokens/s against");
  sub->add_option("--tolerance", o->tolerance, "allowed relative drop below the baseline")->check(CLI::Range(0.0, 1.0));
  sub->add_flag("!--no-warmup", o->warmup, "skip the short warm-up run");
  add_engine_options(*sub, o->engine);
  return {sub, [o, input_len, output_len] {
            o->lengths_given = input_len->count() + output_len->count() > 0;
            return run(*o);
          }};
}

}  // namespace cbatch
