// Bench results: the per-mode table on stdout, the JSON of docs/bench.md, and the comparison
// against a baseline file that CI regression runs use.
#pragma once
#include <string>
#include <vector>

#include "engine/bench/bench_workload.hpp"
#include "engine/core/run_stats.hpp"

namespace cbatch {

struct BenchModeResult {
  std::string mode;                // "continuous", ... with "/no-cache" when prefix caching was off in a both-ways run
  bool prefix_caching = true;
  RunSummary summary;
  double roofline_fraction = -1;   // CUDA only; < 0 when not measured
  double device_idle_fraction = -1;  // 1 - device busy time / wall time; < 0 when not measured
};

struct BenchReport {
  std::string model;
  std::string device;
  WorkloadSpec workload;
  std::string dataset = "random";
  double mean_input_len = -1;      // of a generated dataset's requests (< 0: not generated, not written)
  double mean_output_len = -1;     // their forced output length
  double peak_bytes_per_s = 0;     // measured device peaks behind roofline_fraction (0: not measured)
  double peak_flops_per_s = 0;
  std::vector<BenchModeResult> results;
};

std::string format_bench_table(const BenchReport& report);
std::string format_bench_json(const BenchReport& report);

struct Regression {
  std::string mode;
  double baseline_tokens_per_s = 0;
  double tokens_per_s = 0;
};

// Modes whose output tokens/s fell below baseline * (1 - tolerance). Throws cbatch::Error when the
// baseline file cannot be read or has no results.
std::vector<Regression> compare_with_baseline(const BenchReport& report, const std::string& baseline_path,
                                              double tolerance);

}  // namespace cbatch
