// Writes the per-step trace: one JSON line per engine step with the fields of DESIGN.md "Trace".
#pragma once
#include <cstdio>
#include <string>

#include "engine/core/run_stats.hpp"

namespace cbatch {

std::string format_step_record(const StepRecord& record);

class TraceWriter {
 public:
  explicit TraceWriter(const std::string& path);  // "-" = standard error is not allowed; a file path
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  void write(const StepRecord& record);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace cbatch
