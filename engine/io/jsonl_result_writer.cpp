#include "engine/io/jsonl_result_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/base/open_for_writing.hpp"
#include "engine/base/signal_block.hpp"

namespace cbatch {

JsonlResultWriter::JsonlResultWriter(const std::string& path, bool append, bool ordered, ResultFormatOptions format,
                                     const std::atomic<int>* stop)
    : name_(path == "-" ? "standard output" : "output file '" + elide(path) + "'"), ordered_(ordered),
      format_(std::move(format)) {
  if (path == "-") {
    fd_ = STDOUT_FILENO;
    return;
  }
  fd_ = open_for_writing(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), stop);
  if (fd_ < 0 && errno == EINTR && stop != nullptr) return;  // stopped before a reader came: nothing to write
  if (fd_ < 0) throw Error("cannot open output file '" + elide(path) + "': " + std::strerror(errno));
  owns_fd_ = true;
}

JsonlResultWriter::~JsonlResultWriter() {
  if (owns_fd_) ::close(fd_);
}

void JsonlResultWriter::on_result(const RequestResult& result) {
  emit(result.request->index, format_result_line(result, format_));
}

void JsonlResultWriter::on_error(const RequestError& error) { emit(error.index, format_error_line(error)); }

void JsonlResultWriter::emit(int64_t index, std::string line) {
  if (!ordered_) {
    write_line(line);
    return;
  }
  pending_.emplace(index, std::move(line));
  while (!pending_.empty() && pending_.begin()->first == next_index_) {
    write_line(pending_.begin()->second);
    pending_.erase(pending_.begin());
    ++next_index_;
  }
}

void JsonlResultWriter::flush_pending() {
  for (const auto& [index, line] : pending_) write_line(line);
  pending_.clear();
}

void JsonlResultWriter::write_line(const std::string& line) {
  if (fd_ < 0) throw Error("cannot write " + name_ + ": it was never opened (stopped while waiting for its reader)");
  const StopSignalsBlocked blocked;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot write " + name_ + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  ++num_written_;
}

void JsonlResultWriter::sync() {
  struct stat st {};
  if (!owns_fd_ || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) return;  // /dev/null, a pipe: nothing to sync
  if (::fdatasync(fd_) != 0) throw Error("cannot write " + name_ + " to disk: " + std::strerror(errno));
}

}  // namespace cbatch
