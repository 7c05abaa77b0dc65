// ResultSink that writes one JSONL line per finished (or rejected) request, each with a single write()
// (O_APPEND, no user-space buffer) as it finishes, so a killed run loses no finished line and leaves at
// most a torn last line (which --resume cuts). SIGINT/SIGTERM are blocked while a line is written, so a
// signal handler that exits never cuts one. With `ordered`, lines are held back until every earlier
// item has been written. "-" writes to standard output. A named pipe is opened as a shell opens it, waiting
// for its reader, but a raised stop flag ends that wait: the run then stops before its first step, and
// the writer, which never opened, must not be written to.
#pragma once
#include <atomic>
#include <map>
#include <string>

#include "engine/base/request_stream.hpp"
#include "engine/io/result_format.hpp"

namespace cbatch {

class JsonlResultWriter final : public ResultSink {
 public:
  // append: keep the file's content (--resume); otherwise the file is truncated. stop: the flag that ends
  // a wait for a named pipe's reader (may be null).
  JsonlResultWriter(const std::string& path, bool append, bool ordered, ResultFormatOptions format,
                    const std::atomic<int>* stop = nullptr);
  ~JsonlResultWriter() override;
  JsonlResultWriter(const JsonlResultWriter&) = delete;
  JsonlResultWriter& operator=(const JsonlResultWriter&) = delete;

  void on_result(const RequestResult& result) override;
  void on_error(const RequestError& error) override;
  // Writes whatever --ordered still holds (after an interrupted run some earlier items never finish).
  void flush_pending();
  // fdatasync of a regular output file (a no-op for standard output, /dev/null, pipes): the lines then
  // survive a power loss too.
  void sync();
  int64_t num_written() const { return num_written_; }

 private:
  void emit(int64_t index, std::string line);
  void write_line(const std::string& line);

  std::string name_;  // for messages: "output file 'PATH'" or "standard output"
  int fd_ = -1;
  bool owns_fd_ = false;
  bool ordered_;
  ResultFormatOptions format_;
  std::map<int64_t, std::string> pending_;  // --ordered: lines waiting for an earlier index
  int64_t next_index_ = 0;
  int64_t num_written_ = 0;
};

}  // namespace cbatch
