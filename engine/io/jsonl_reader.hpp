// Streams the lines of a JSONL file (or "-" for stdin) in fixed-size chunks, so memory stays at one
// chunk plus the longest line however long the file is; a line longer than max_line_bytes (a binary
// file given by mistake is one endless line) keeps only its start and is flagged too_long. Blank lines
// are skipped but counted; a UTF-8 BOM at the start of the file and the "\r" of CRLF line ends are
// dropped. Each line's text is followed by kJsonPadding zero bytes so simdjson can parse it in place.
//
// Reads take what is there (read(2), not a full chunk), so lines from a pipe are handed out as they
// arrive; ready() tells a caller with other work whether next() can go on without waiting for a producer.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

inline constexpr size_t kJsonPadding = 64;  // >= SIMDJSON_PADDING (static_assert in the .cpp)
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;

struct JsonlLine {
  int64_t line_no = 0;       // 1-based, blank lines included
  bool truncated = false;    // the input's last line, with no trailing newline (possibly torn)
  bool too_long = false;     // longer than the reader's max_line_bytes: text() holds only its start
  int64_t begin_offset = 0;  // byte offset of the line's first byte in the input (BOM included)
  int64_t end_offset = 0;    // byte offset just past its newline, or the end of the input
  std::string buffer;        // (size + kJsonPadding) the text, then zero bytes
  size_t size = 0;           // length of the text, without "\r\n"

  std::string_view text() const { return {buffer.data(), size}; }
};

class JsonlReader {
 public:
  // Throws cbatch::Error naming the path and the errno text when the file cannot be opened.
  explicit JsonlReader(const std::string& path, size_t chunk_bytes = size_t{1} << 16,
                       size_t max_line_bytes = kMaxLineBytes);
  ~JsonlReader();
  JsonlReader(const JsonlReader&) = delete;
  JsonlReader& operator=(const JsonlReader&) = delete;

  // The next non-blank line; false at the end of the input, or when the stop flag was raised (a partly
  // received line is then dropped, not handed out as a torn one). Throws cbatch::Error on a read error.
  bool next(JsonlLine& out);

  // Whether next() can start without waiting on a producer: a regular file, the end of the input, a whole
  // line already buffered, or bytes (or the end) waiting in the pipe. It may still wait for the rest of a
  // line a producer is in the middle of writing.
  bool ready() const;

  // Give up as soon as *flag is non-zero (a signal handler's flag, say): while waiting for input, and
  // before each chunk of a regular file (a long file then stops within one chunk).
  void set_stop_flag(const std::atomic<int>* flag) { stop_ = flag; }
  bool stopped() const { return stopped_; }  // next() returned false because of the stop flag

  const std::string& path() const { return path_; }
  // Bytes of the input consumed so far; the input's size once next() has returned false.
  int64_t offset() const { return offset_; }

 private:
  bool read_raw_line(JsonlLine& out);
  void finish_line(JsonlLine& out);
  bool fill();
  bool wait_for_input();

  std::string path_;
  int fd_ = -1;
  bool owns_fd_ = false;
  bool is_regular_ = false;  // reads never wait on a producer
  const std::atomic<int>* stop_ = nullptr;
  bool stopped_ = false;
  size_t max_line_bytes_;
  std::vector<char> chunk_;  // (chunk_bytes) the bytes read but not yet handed out are [pos_, end_)
  size_t pos_ = 0;
  size_t end_ = 0;
  bool at_eof_ = false;
  int64_t offset_ = 0;       // input offset of chunk_[pos_]
  int64_t line_no_ = 0;
};

}  // namespace cbatch
