// Writes the per-step trace: one JSON line per engine step with the fields of docs/formats.md "The trace". Lines
// are buffered (stdio), so a write error may show only when the buffer is written: close() writes it
// and reports that; the destructor closes without a word (an error is already on its way then). A named
// pipe is opened waiting for its reader, until the stop flag ends the wait (then nothing is written).
#pragma once
#include <atomic>
#include <cstdio>
#include <string>

#include "engine/core/run_stats.hpp"

namespace cbatch {

std::string format_step_record(const StepRecord& record);

class TraceWriter {
 public:
  // A file path ("-" is not standard error). stop: the flag that ends a wait for a named pipe's reader.
  explicit TraceWriter(const std::string& path, const std::atomic<int>* stop = nullptr);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  void write(const StepRecord& record);
  // Writes what is buffered and closes the file. Throws cbatch::Error naming the file when any write failed.
  void close();

 private:
  [[noreturn]] void fail(int err) const;

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace cbatch
