// JsonlReader: chunked reads with memchr for line ends; a line is assembled in the caller's buffer,
// which keeps its capacity from line to line.
#include "engine/io/jsonl_reader.hpp"

#include <simdjson.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

static_assert(kJsonPadding >= simdjson::SIMDJSON_PADDING, "JSONL lines must carry simdjson's padding");

namespace {

bool is_blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
}

}  // namespace

JsonlReader::JsonlReader(const std::string& path, size_t chunk_bytes, size_t max_line_bytes)
    : path_(path), max_line_bytes_(max_line_bytes), chunk_(chunk_bytes > 0 ? chunk_bytes : 1) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error("cannot open '" + elide(path) + "': " + std::strerror(errno));
    owns_fd_ = true;
  }
  struct stat st {};
  is_regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
}

JsonlReader::~JsonlReader() {
  if (owns_fd_) ::close(fd_);
}

bool JsonlReader::next(JsonlLine& out) {
  while (read_raw_line(out)) {
    if (out.too_long || !is_blank(out.text())) return true;
  }
  return false;
}

bool JsonlReader::ready() const {
  if (is_regular_ || at_eof_ || stopped_) return true;
  if (std::memchr(chunk_.data() + pos_, '\n', end_ - pos_) != nullptr) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// Waits until the input has bytes (or its end, or an error) to read; false once the stop flag is up.
// poll is never restarted after a signal handler, so a signal ends the wait at once. A regular file
// never waits, but a long one is read chunk by chunk, so the flag is looked at before each chunk.
bool JsonlReader::wait_for_input() {
  if (stop_ == nullptr) return true;
  if (is_regular_) return stop_->load() == 0;
  for (;;) {
    if (stop_->load() != 0) return false;
    pollfd p{fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, 200);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let read() report it
  }
}

bool JsonlReader::fill() {
  if (at_eof_ || stopped_) return false;
  for (;;) {
    if (!wait_for_input()) {
      stopped_ = true;
      return false;
    }
    const ssize_t n = ::read(fd_, chunk_.data(), chunk_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot read '" + path_ + "': " + std::strerror(errno));
    }
    if (n == 0) {
      at_eof_ = true;
      return false;
    }
    pos_ = 0;
    end_ = static_cast<size_t>(n);
    return true;
  }
}

bool JsonlReader::read_raw_line(JsonlLine& out) {
  out.buffer.clear();
  out.begin_offset = offset_;
  out.too_long = false;
  bool has_bytes = false;
  for (;;) {
    if (pos_ == end_ && !fill()) {
      if (!has_bytes || stopped_) return false;
      out.truncated = true;
      break;
    }
    has_bytes = true;
    const char* start = chunk_.data() + pos_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
    const size_t n = newline != nullptr ? static_cast<size_t>(newline - start) : end_ - pos_;
    const size_t room = max_line_bytes_ - std::min(max_line_bytes_, out.buffer.size());
    out.too_long = out.too_long || n > room;
    out.buffer.append(start, std::min(n, room));
    pos_ += n;
    offset_ += static_cast<int64_t>(n);
    if (newline != nullptr) {
      ++pos_;
      ++offset_;
      out.truncated = false;
      break;
    }
  }
  finish_line(out);
  return true;
}

void JsonlReader::finish_line(JsonlLine& out) {
  out.line_no = ++line_no_;
  out.end_offset = offset_;  // with too_long, end_offset - begin_offset is the line's real length
  if (out.line_no == 1 && out.buffer.starts_with("\xEF\xBB\xBF")) out.buffer.erase(0, 3);
  if (!out.buffer.empty() && out.buffer.back() == '\r') out.buffer.pop_back();
  out.size = out.buffer.size();
  out.buffer.append(kJsonPadding, '\0');
}

}  // namespace cbatch
