// The progress line on stderr: requests done (of the total when known), output tokens/s, KV cache use
// and the step. On a terminal it rewrites one line; otherwise it prints a line every few seconds.
#pragma once
#include <cstdint>

#include "engine/core/run_stats.hpp"

namespace cbatch {

class ProgressReporter {
 public:
  explicit ProgressReporter(bool enabled);
  // total: number of requests when known, else -1.
  void on_step(const StepRecord& record, int64_t total);
  void finish();

 private:
  bool enabled_;
  bool is_tty_;
  int64_t done_ = 0;
  int64_t tokens_ = 0;
  double last_print_ms_ = -1e9;
  bool printed_ = false;
};

}  // namespace cbatch
