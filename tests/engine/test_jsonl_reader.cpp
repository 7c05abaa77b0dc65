// JsonlReader: line numbering across blank lines, CRLF, BOM, a torn last line, chunk boundaries,
// very long lines, the padding simdjson relies on, errors for unreadable paths, and pipes: lines as they
// arrive, ready(), and the stop flag that ends a wait, or a long read of a regular file.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/io/jsonl_reader.hpp"
#include "temp_file.hpp"

using cbatch::JsonlLine;
using cbatch::JsonlReader;
using cbatch::test::TempFile;

namespace {

struct Seen {
  int64_t line_no;
  std::string text;
  bool truncated;
  int64_t begin_offset;
  int64_t end_offset;
};

std::vector<Seen> read_all(const std::string& path, size_t chunk_bytes = 1 << 16) {
  JsonlReader reader(path, chunk_bytes);
  JsonlLine line;
  std::vector<Seen> seen;
  while (reader.next(line)) {
    seen.push_back({line.line_no, std::string(line.text()), line.truncated, line.begin_offset,
                    line.end_offset});
  }
  return seen;
}

const std::string kMixed =
    "\xEF\xBB\xBF{\"a\":1}\r\n"  // line 1: BOM and CRLF, bytes [0, 12)
    "\r\n"                       // line 2: blank
    "   \n"                      // line 3: whitespace only
    "{\"b\":2}\n"                // line 4, bytes [18, 26)
    "\t\n"                       // line 5: blank
    "{\"c\":3}";                 // line 6: no trailing newline, bytes [28, 35)

}  // namespace

TEST_CASE("jsonl reader: numbering, blank lines, CRLF, BOM and a last line without newline") {
  TempFile file(kMixed);
  const auto seen = read_all(file.path());
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].line_no == 1);
  CHECK(seen[0].text == "{\"a\":1}");
  CHECK_FALSE(seen[0].truncated);
  CHECK(seen[0].begin_offset == 0);
  CHECK(seen[0].end_offset == 12);
  CHECK(seen[1].line_no == 4);
  CHECK(seen[1].text == "{\"b\":2}");
  CHECK(seen[1].begin_offset == 18);
  CHECK(seen[1].end_offset == 26);
  CHECK(seen[2].line_no == 6);
  CHECK(seen[2].text == "{\"c\":3}");
  CHECK(seen[2].truncated);
  CHECK(seen[2].end_offset == 35);
}

TEST_CASE("jsonl reader: chunk boundaries anywhere give the same lines") {
  TempFile file(kMixed);
  const auto expected = read_all(file.path());
  for (size_t chunk : {1, 2, 3, 5, 7, 13}) {
    CAPTURE(chunk);
    const auto seen = read_all(file.path(), chunk);
    REQUIRE(seen.size() == expected.size());
    for (size_t i = 0; i < seen.size(); ++i) {
      CHECK(seen[i].line_no == expected[i].line_no);
      CHECK(seen[i].text == expected[i].text);
      CHECK(seen[i].truncated == expected[i].truncated);
      CHECK(seen[i].end_offset == expected[i].end_offset);
    }
  }
}

TEST_CASE("jsonl reader: a final newline ends the file without an extra or truncated line") {
  TempFile file("{\"x\":1}\n{\"y\":2}\n\n");
  const auto seen = read_all(file.path());
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].line_no == 2);
  CHECK_FALSE(seen[1].truncated);
}

TEST_CASE("jsonl reader: empty inputs give no lines") {
  for (const char* content : {"", "\xEF\xBB\xBF", "\n\n  \r\n", "\xEF\xBB\xBF  "}) {
    TempFile file(content);
    CHECK(read_all(file.path()).empty());
  }
}

TEST_CASE("jsonl reader: a BOM is dropped only at the start of the file") {
  TempFile file("{}\n\xEF\xBB\xBF{}\n");
  const auto seen = read_all(file.path());
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].text == "{}");
  CHECK(seen[1].text == "\xEF\xBB\xBF{}");
}

TEST_CASE("jsonl reader: a 10 MB line, followed by zero padding") {
  const std::string big = "{\"prompt\": \"" + std::string(10'000'000, 'a') + "\"}";
  TempFile file(big + "\n\n{\"z\":0}\n");
  JsonlReader reader(file.path(), 4096);
  JsonlLine line;
  REQUIRE(reader.next(line));
  CHECK(line.line_no == 1);
  CHECK(line.size == big.size());
  CHECK(line.text() == big);
  REQUIRE(line.buffer.size() >= line.size + cbatch::kJsonPadding);
  CHECK(line.buffer.find_first_not_of('\0', line.size) == std::string::npos);
  REQUIRE(reader.next(line));
  CHECK(line.line_no == 3);
  CHECK(line.text() == "{\"z\":0}");
  CHECK_FALSE(reader.next(line));
  CHECK(reader.offset() == static_cast<int64_t>(big.size() + 10));
}

TEST_CASE("jsonl reader: a missing file names the path and the reason") {
  const std::string path = "/nonexistent-dir-cbatch/prompts.jsonl";
  try {
    JsonlReader reader(path);
    FAIL("no exception");
  } catch (const cbatch::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("No such file or directory") != std::string::npos);
  }
}

TEST_CASE("jsonl reader: a directory fails on read with the path") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  JsonlLine line;
  try {
    JsonlReader reader(dir);
    reader.next(line);
    FAIL("no exception");
  } catch (const cbatch::Error& e) {
    CHECK(std::string(e.what()).find(dir) != std::string::npos);
  }
}

TEST_CASE("jsonl reader: \"-\" reads standard input") {
  TempFile file("{\"s\":1}\n");
  REQUIRE(std::freopen(file.path().c_str(), "rb", stdin) != nullptr);
  const auto seen = read_all("-");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].text == "{\"s\":1}");
}

TEST_CASE("jsonl reader: a line over max_line_bytes keeps only its start and the next line is whole") {
  TempFile file("{\"a\": 1}\n" + std::string(1000, 'x') + "\n{\"b\": 2}\n" + std::string(101, 'y'));
  JsonlReader reader(file.path(), 7, 100);
  JsonlLine line;
  REQUIRE(reader.next(line));
  CHECK_FALSE(line.too_long);
  REQUIRE(reader.next(line));
  CHECK(line.too_long);
  CHECK(line.line_no == 2);
  CHECK(line.text() == std::string(100, 'x'));
  CHECK(line.end_offset - line.begin_offset == 1001);
  REQUIRE(reader.next(line));
  CHECK_FALSE(line.too_long);
  CHECK(line.text() == "{\"b\": 2}");
  REQUIRE(reader.next(line));
  CHECK(line.too_long);
  CHECK(line.truncated);
  CHECK_FALSE(reader.next(line));
}

namespace {

// A pipe whose read end the reader opens by path, as it would a FIFO or a shell's process substitution.
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { REQUIRE(::pipe(fds) == 0); }
  ~Pipe() {
    close_write();
    ::close(fds[0]);
  }
  std::string path() const { return "/dev/fd/" + std::to_string(fds[0]); }
  void write(std::string_view s) const { REQUIRE(::write(fds[1], s.data(), s.size()) == static_cast<ssize_t>(s.size())); }
  void close_write() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
  }
};

}  // namespace

TEST_CASE("jsonl reader: a pipe's lines are handed out as they arrive; ready() says when next() would wait") {
  Pipe pipe;
  JsonlReader reader(pipe.path());
  pipe.write("{\"a\":1}\n");
  CHECK(reader.ready());
  JsonlLine line;
  REQUIRE(reader.next(line));  // one line in a 64 KiB chunk: a read that waited for a full chunk would hang
  CHECK(line.text() == "{\"a\":1}");
  CHECK_FALSE(reader.ready());  // empty pipe, writer still open
  pipe.write("{\"b\":2}\n{\"c\"");
  CHECK(reader.ready());
  REQUIRE(reader.next(line));
  CHECK(line.text() == "{\"b\":2}");
  CHECK_FALSE(reader.ready());  // only the start of line 3 is buffered and the pipe is empty
  pipe.write(":3}");
  pipe.close_write();
  REQUIRE(reader.next(line));
  CHECK(line.text() == "{\"c\":3}");
  CHECK(line.truncated);
  CHECK(line.line_no == 3);
  CHECK(reader.ready());
  CHECK_FALSE(reader.next(line));
  CHECK_FALSE(reader.stopped());
}

TEST_CASE("jsonl reader: a raised stop flag ends a wait on a silent pipe and drops a partly received line") {
  Pipe pipe;
  JsonlReader reader(pipe.path());
  std::atomic<int> stop{0};
  reader.set_stop_flag(&stop);
  pipe.write("{\"a\":1}\n{\"b\"");
  JsonlLine line;
  REQUIRE(reader.next(line));
  CHECK(line.text() == "{\"a\":1}");
  std::thread raise([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop = 15;
  });
  CHECK_FALSE(reader.next(line));  // waits for the rest of line 2 until the flag goes up
  raise.join();
  CHECK(reader.stopped());
  CHECK(reader.ready());
  CHECK_FALSE(reader.next(line));
}

TEST_CASE("jsonl reader: a raised stop flag ends the read of a regular file at the next chunk") {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "{\"i\": " + std::to_string(i) + "}\n";
  TempFile file(text);
  JsonlReader reader(file.path(), 64);
  std::atomic<int> stop{0};
  reader.set_stop_flag(&stop);
  JsonlLine line;
  REQUIRE(reader.next(line));
  stop = 2;
  int more = 0;
  while (reader.next(line)) ++more;
  CHECK(more < 10);  // what the 64-byte chunk already held, no more
  CHECK(reader.stopped());
}
