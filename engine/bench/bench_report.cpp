#include "engine/bench/bench_report.hpp"

#include <algorithm>
#include <cstdio>

#include <simdjson.h>

#include "engine/base/error.hpp"
#include "engine/io/json_writer.hpp"
#include "engine/io/summary_format.hpp"

namespace cbatch {

std::string format_bench_table(const BenchReport& report) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-20s %8s %10s %11s %8s %7s %8s %7s %9s %9s %9s %9s %8s %9s%s\n", "mode",
                "requests", "out_tok/s", "total_tok/s", "req/s", "budget", "padding", "preempt", "ttft_p50", "ttft_p99",
                "e2e_p50", "e2e_p99", "wall_s", "cache_hit",
                report.results.empty() || report.results[0].roofline_fraction < 0 ? "" : " roofline gpu_idle");
  out += line;
  for (const BenchModeResult& r : report.results) {
    const RunSummary& s = r.summary;
    std::snprintf(line, sizeof(line),
                  "%-20s %8lld %10.1f %11.1f %8.2f %7.3f %8.3f %7lld %9.1f %9.1f %9.1f %9.1f %8.2f %9.3f",
                  r.mode.c_str(), static_cast<long long>(s.requests_ok), s.output_tokens_per_s(), s.total_tokens_per_s(),
                  s.requests_per_s(), s.mean_budget_use, s.padding_fraction, static_cast<long long>(s.preemptions),
                  s.ttft_ms_p50, s.ttft_ms_p99, s.e2e_ms_p50, s.e2e_ms_p99, s.wall_s, s.prefix_cache_hit_rate());
    out += line;
    if (r.roofline_fraction >= 0) {
      if (r.device_idle_fraction >= 0) {
        std::snprintf(line, sizeof(line), " %8.3f %8.3f", r.roofline_fraction, r.device_idle_fraction);
      } else {
        std::snprintf(line, sizeof(line), " %8.3f %8s", r.roofline_fraction, "-");
      }
      out += line;
    }
    out += "\n";
  }
  return out;
}

std::string format_bench_json(const BenchReport& report) {
  JsonWriter w;
  w.begin_object();
  w.key("model").string(report.model);
  w.key("device").string(report.device);
  w.key("workload").begin_object();
  w.key("dataset").string(report.dataset);
  w.key("num_prompts").int64(report.workload.num_prompts);
  w.key("input_len").begin_array().int64(report.workload.input_len.min).int64(report.workload.input_len.max).end_array();
  w.key("output_len").begin_array().int64(report.workload.output_len.min).int64(report.workload.output_len.max).end_array();
  w.key("seed").uint64(report.workload.seed);
  w.key("temperature").number(report.workload.temperature, 3);
  w.key("top_p").number(report.workload.top_p, 3);
  w.key("top_k").int64(report.workload.top_k);
  w.key("prefix_len").int64(report.workload.prefix_len);
  w.key("num_prefixes").int64(report.workload.num_prefixes);
  w.key("n").int64(report.workload.n);
  if (report.mean_input_len >= 0) {
    w.key("mean_input_len").number(report.mean_input_len, 3);
    w.key("mean_output_len").number(report.mean_output_len, 3);
  }
  w.end_object();
  if (report.peak_bytes_per_s > 0) {
    w.key("peaks").begin_object();
    w.key("copy_bytes_per_s").number(report.peak_bytes_per_s, 0);
    w.key("gemm_flops_per_s").number(report.peak_flops_per_s, 0);
    w.end_object();
  }
  w.key("results").begin_array();
  for (const BenchModeResult& r : report.results) {
    const RunSummary& s = r.summary;
    w.begin_object();
    w.key("mode").string(r.mode);
    w.key("prefix_caching").boolean(r.prefix_caching);
    w.key("requests").int64(s.requests_ok);
    write_throughput_fields(w, s);
    write_kv_fields(w, s);
    if (s.state_slots_total > 0) write_state_fields(w, s);  // a hybrid model's recurrent-state slots
    w.key("host_schedule_s").number(s.schedule_s, 4);
    w.key("forward_s").number(s.forward_s, 4);
    w.key("host_update_s").number(s.update_s, 4);
    if (r.roofline_fraction >= 0) {
      w.key("roofline_fraction").number(r.roofline_fraction, 4);
      w.key("gflops_per_s").number(r.summary.wall_s > 0 ? r.summary.flops * 1e-9 / r.summary.wall_s : 0, 2);
      const double steps = static_cast<double>(std::max<int64_t>(1, s.steps));
      w.key("bytes_per_step").number(s.bytes / steps);
      if (s.experts_touched > 0) {
        w.key("expert_bytes_per_step").number(s.expert_bytes / steps);
        w.key("experts_touched_per_step").number(static_cast<double>(s.experts_touched) / steps);
      }
    }
    if (r.device_idle_fraction >= 0) w.key("gpu_idle_fraction").number(r.device_idle_fraction, 4);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take() + "\n";
}

std::vector<Regression> compare_with_baseline(const BenchReport& report, const std::string& baseline_path,
                                              double tolerance) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto error = parser.load(baseline_path).get(doc)) {
    throw Error("cannot read baseline '" + baseline_path + "': " + simdjson::error_message(error));
  }
  simdjson::dom::array results;
  if (doc["results"].get_array().get(results)) throw Error("baseline '" + baseline_path + "' has no 'results' array");
  std::vector<Regression> regressions;
  for (simdjson::dom::element entry : results) {
    std::string_view mode;
    double base = 0;
    if (entry["mode"].get_string().get(mode) || entry["output_tokens_per_s"].get_double().get(base)) {
      throw Error("baseline '" + baseline_path + "': each result needs 'mode' and 'output_tokens_per_s'");
    }
    for (const BenchModeResult& r : report.results) {
      const double now = r.summary.output_tokens_per_s();
      if (r.mode == mode && now < base * (1.0 - tolerance)) regressions.push_back({r.mode, base, now});
    }
  }
  return regressions;
}

}  // namespace cbatch
