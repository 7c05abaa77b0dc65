// `cbatch run PROMPTS.jsonl`: every request of a JSONL file through the engine, results as JSONL.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "cmd/commands.hpp"
#include "cmd/data_parallel.hpp"
#include "cmd/engine_options.hpp"
#include "cmd/run_plan.hpp"
#include "cmd/signals.hpp"
#include "engine/core/engine.hpp"
#include "engine/base/error.hpp"
#include "engine/base/file_type.hpp"
#include "engine/base/text_output.hpp"
#include "engine/io/jsonl_result_writer.hpp"
#include "engine/io/jsonl_source.hpp"
#include "engine/io/output_lock.hpp"
#include "engine/io/progress.hpp"
#include "engine/io/resume.hpp"
#include "engine/base/signal_block.hpp"
#include "engine/io/summary_format.hpp"
#include "engine/io/trace_writer.hpp"
#include "engine/scale/shard_summary.hpp"

namespace cbatch {
namespace {

struct RunOptions {
  std::string prompts;
  std::string output = "-";
  std::string trace;
  std::string summary;
  bool ordered = false;
  bool resume = false;
  int data_parallel_size = 1;
  EngineOptions engine;
};

// Lines in a regular file (an upper bound of its requests, for the progress line); -1 when not known:
// standard input, a named pipe or a device (a second read would take the run's lines, or never end), or
// a stop signal during the count (a file of gigabytes takes seconds).
int64_t count_lines(const std::string& path, const std::atomic<int>& stop) {
  if (path == "-" || !is_regular_file(path)) return -1;
  std::ifstream in(path, std::ios::binary);
  int64_t lines = 0;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    if (stop.load() != 0) return -1;
    for (std::streamsize i = 0; i < in.gcount(); ++i) lines += buffer[i] == '\n';
  }
  return lines;
}

std::string model_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// --resume: reads the output file back and cuts a torn last line before anything is appended. A stop
// signal ends the read (the state is then marked stopped and nothing is cut).
ResumeState open_resume(const RunOptions& o, const std::atomic<int>& stop) {
  ResumeState resume = read_resume_state(o.output, &stop);
  if (resume.stopped) return resume;
  if (resume.num_bad_lines > 0) {
    std::fprintf(stderr, "cbatch: warning: %lld lines of '%s' are not cbatch output lines (is it the right file?)\n",
                 static_cast<long long>(resume.num_bad_lines), o.output.c_str());
  }
  truncate_torn_tail(o.output, resume);
  return resume;
}

// Lines still to answer (an upper bound of the requests, for the progress line); -1 when not known.
int64_t remaining_lines(const RunOptions& o, const ResumeState& resume, const ShardSpec& shard,
                        const std::atomic<int>& stop) {
  const int64_t all_lines = count_lines(o.prompts, stop);
  if (all_lines < 0) return -1;
  const int64_t lines = (all_lines + shard.count - 1) / shard.count;  // about the shard's share
  return lines - static_cast<int64_t>(resume.result_ids.size() + resume.error_lines.size());
}

// --shard: which shard of which input this run answers, for its summary (and `merge`).
std::optional<ShardProvenance> shard_provenance(const RunOptions& o, const RunPlan& plan) {
  if (!plan.shard) return std::nullopt;
  const ShardSpec shard = *plan.shard;
  if (o.prompts == "-") {
    throw Error("--shard reads the prompts from a file, not standard input: merge checks every shard's input "
                "by the file's fingerprint");
  }
  return ShardProvenance{shard, o.prompts, fingerprint_file(o.prompts), o.output};
}

// A shard's summary is written beside its output file unless --summary names another place.
std::string summary_path(const RunOptions& o, const ShardProvenance* shard) {
  if (!o.summary.empty() || shard == nullptr || o.output == "-") return o.summary;
  return default_summary_path(o.output);
}

void report(const RunOptions& o, const RunPlan& plan, const RunSummary& summary, const Backend& backend,
            const ShardProvenance* shard) {
  if (!plan.engine.quiet) std::fputs(format_summary_text(summary).c_str(), stderr);
  const std::string path = summary_path(o, shard);
  if (!path.empty()) {
    write_text_file(path, format_summary_json(summary, mode_name(plan.engine.scheduler.mode), backend.traits().device_name, shard));
  }
}

// --data-parallel-size D: the parent checks the whole command line (its plan) before any child starts.
int start_data_parallel(const RunOptions& o) {
  if (!o.engine.shard.empty()) throw Error("--data-parallel-size makes its own shards: it cannot be combined with --shard");
  if (!o.engine.lora_modules.empty()) throw Error("--data-parallel-size cannot be combined with --lora-modules yet");
  const RunPlan plan = resolve_run_plan(o.engine);
  DataParallelRun r;
  r.size = o.data_parallel_size;
  r.prompts = o.prompts;
  r.output = o.output;
  r.summary = o.summary;
  r.trace = o.trace;
  r.device = plan.device;
  r.threads = o.engine.threads;
  r.quiet = plan.engine.quiet;
  return run_data_parallel(r);
}

int exit_status(const RunSummary& summary, int stop_signal) {
  if (summary.interrupted) return 128 + stop_signal;
  return summary.requests_failed + summary.resumed_failed > 0 ? 2 : 0;
}

int run(const RunOptions& o) {
  if (o.resume && o.output == "-") throw Error("--resume needs an output file (-o OUT.jsonl), not standard output");
  if (o.output != "-" && (o.output == o.prompts || is_same_regular_file(o.output, o.prompts))) {
    throw Error("the output file must differ from the prompts file");
  }
  if (o.data_parallel_size > 1) return start_data_parallel(o);
  const RunPlan plan = resolve_run_plan(o.engine);
  const std::optional<ShardProvenance> shard = shard_provenance(o, plan);
  EngineHooks hooks;
  hooks.stop_signal = &install_stop_signals();  // a signal while loading stops the run before its first step
  const OutputFileLock lock(o.output);
  const ResumeState resume = o.resume ? open_resume(o, *hooks.stop_signal) : ResumeState{};
  if (resume.stopped) {
    if (!plan.engine.quiet) std::fprintf(stderr, "[cbatch] stopped while reading '%s' back; nothing was run\n", o.output.c_str());
    return 128 + hooks.stop_signal->load();
  }
  const auto load_start = std::chrono::steady_clock::now();
  Model model = load_model(plan.model);
  const ModelPlan model_plan = resolve_model_plan(plan, model);
  std::unique_ptr<Backend> backend;
  {
    const StopSignalsBlocked blocked;  // threads the backend starts never take SIGINT/SIGTERM
    backend = make_backend(plan, model_plan, model);
  }
  if (!plan.engine.quiet) print_load_line(model, *backend, load_start);
  Engine engine(model_plan.engine, model, *backend);

  JsonlRequestSource source(o.prompts, model, &model_plan.chat, plan.requests, plan.engine.seed,
                            o.resume ? &resume : nullptr);
  if (model_plan.rerank) source.set_rerank_format(&*model_plan.rerank);
  source.set_stop_flag(hooks.stop_signal);  // a signal also ends a wait on a silent pipe
  if (shard) source.set_shard(shard->shard);
  ResultFormatOptions format;
  format.model = model_name(model.path);
  // A named pipe as output waits for its reader; a stop signal ends the wait, and the run before its first step.
  JsonlResultWriter writer(o.output, o.resume, o.ordered, format, hooks.stop_signal);
  std::unique_ptr<TraceWriter> trace =
      o.trace.empty() ? nullptr : std::make_unique<TraceWriter>(o.trace, hooks.stop_signal);
  ProgressReporter progress(!plan.engine.quiet);
  const int64_t total = remaining_lines(o, resume, shard ? shard->shard : ShardSpec{}, *hooks.stop_signal);
  hooks.on_step = [&](const StepRecord& record) {
    if (trace) trace->write(record);
    progress.on_step(record, total);
  };
  RunSummary summary = engine.run(source, writer, hooks);
  writer.flush_pending();
  writer.sync();
  if (trace) trace->close();
  progress.finish();
  summary.resumed_ok = source.num_resumed_ok();
  summary.resumed_failed = source.num_resumed_failed();
  report(o, plan, summary, *backend, shard ? &*shard : nullptr);
  return exit_status(summary, hooks.stop_signal->load());
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "run every request of a JSONL prompts file");
  sub->add_option("prompts", options->prompts, "JSONL prompts file, or - for standard input")->required();
  sub->add_option("-o,--output", options->output, "JSONL output file, or - for standard output (default)");
  sub->add_option("--trace", options->trace, "write one JSON line per engine step to this file");
  sub->add_option("--summary", options->summary, "write the end-of-run summary as JSON to this file");
  sub->add_flag("--ordered", options->ordered, "write results in input order");
  sub->add_flag("--resume", options->resume,
                "skip requests that already have a line in the output file, append the rest");
  sub->add_option("--data-parallel-size", options->data_parallel_size,
                  "run D processes, one per GPU (on the CPU: --threads split among them), each a shard, then merge")
      ->check(CLI::Range(1, 1024));
  add_engine_options(*sub, options->engine);
  return {sub, [options] { return run(*options); }};
}

}  // namespace cbatch
