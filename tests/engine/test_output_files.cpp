// Outputs written whole: write_text_file checks every step (a full disk is an error naming the path);
// ReplacedFile writes through a symlink to its target, keeps the target's permission bits, leaves the
// old file and no temporary file when not committed, and refuses what is not a regular file before
// writing; the trace writer reports at close a write error its buffer hid; open_for_writing waits for a
// named pipe's reader only until the stop flag is raised.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "engine/base/error.hpp"
#include "engine/base/open_for_writing.hpp"
#include "engine/base/replaced_file.hpp"
#include "engine/base/text_output.hpp"
#include "engine/io/trace_writer.hpp"
#include "fifo.hpp"

namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp directory, removed with everything in it at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("cbatch_test_" + std::to_string(::getpid()) + "_dir" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string at(const std::string& name) const { return (path / name).string(); }
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const cbatch::Error& e) {
    return e.what();
  }
  return "";
}

unsigned mode_bits(const std::string& path) { return static_cast<unsigned>(fs::status(path).permissions()); }

bool has_temp_files(const TempDir& dir) {
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    if (entry.path().filename().string().find("-tmp-") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("write_text_file: writes the whole text; a failed write names the path and the reason") {
  TempDir dir;
  const std::string path = dir.at("summary.json");
  write_text(path, "an older and longer content\n");
  cbatch::write_text_file(path, "{}\n");
  CHECK(read_text(path) == "{}\n");
  // ofstream's `out << text; if (!out)` misses this one: the text fits its buffer, the error comes at close.
  CHECK(error_of([] { cbatch::write_text_file("/dev/full", "{}\n"); }) ==
        "cannot write '/dev/full': No space left on device");
  const std::string missing = dir.at("no-such-dir/summary.json");
  CHECK(error_of([&] { cbatch::write_text_file(missing, "{}\n"); }) ==
        "cannot write '" + missing + "': No such file or directory");
  cbatch::write_text_file("/dev/null", "{}\n");  // not a regular file, and fine
}

TEST_CASE("replaced file: the old content stays until commit, then the new one is in place") {
  TempDir dir;
  const std::string path = dir.at("merged.jsonl");
  write_text(path, "old\n");
  fs::permissions(path, fs::perms(0640));
  {
    cbatch::ReplacedFile out(path);
    out.append("new ");
    out.append("lines\n");
    CHECK(read_text(path) == "old\n");
    out.commit();
  }
  CHECK(read_text(path) == "new lines\n");
  CHECK(mode_bits(path) == 0640);
  {
    cbatch::ReplacedFile out(path);
    out.append("never committed\n");
  }
  CHECK(read_text(path) == "new lines\n");
  CHECK_FALSE(has_temp_files(dir));
}

TEST_CASE("replaced file: a symlink stays and its target is replaced, with the target's permission bits") {
  TempDir dir;
  fs::create_directories(dir.path / "results");
  write_text(dir.at("results/out.jsonl"), "old\n");
  fs::permissions(dir.at("results/out.jsonl"), fs::perms(0600));
  fs::create_symlink("results/out.jsonl", dir.at("link.jsonl"));  // relative to the link's directory
  fs::create_symlink("link.jsonl", dir.at("link2.jsonl"));         // a chain of two
  cbatch::ReplacedFile out(dir.at("link2.jsonl"));
  out.append("new\n");
  out.commit();
  CHECK(fs::is_symlink(dir.at("link2.jsonl")));
  CHECK(fs::is_symlink(dir.at("link.jsonl")));
  CHECK(read_text(dir.at("results/out.jsonl")) == "new\n");
  CHECK(mode_bits(dir.at("results/out.jsonl")) == 0600);
  fs::create_symlink("later.jsonl", dir.at("dangling.jsonl"));
  cbatch::ReplacedFile made(dir.at("dangling.jsonl"));
  made.append("made\n");
  made.commit();
  CHECK(fs::is_symlink(dir.at("dangling.jsonl")));
  CHECK(read_text(dir.at("later.jsonl")) == "made\n");
  CHECK_FALSE(has_temp_files(dir));
}

TEST_CASE("replaced file: a device, a named pipe, a directory or a link to one is refused, untouched") {
  TempDir dir;
  const cbatch::test::TempFifo fifo;
  fs::create_directories(dir.path / "a-dir");
  fs::create_symlink(fifo.path(), dir.at("to-fifo"));
  CHECK(error_of([] { cbatch::ReplacedFile out("/dev/null"); })
            .starts_with("output '/dev/null' is a character device, not a regular file"));
  CHECK(error_of([&] { cbatch::ReplacedFile out(fifo.path()); })
            .starts_with("output '" + fifo.path() + "' is a named pipe (FIFO), not a regular file"));
  CHECK(error_of([&] { cbatch::ReplacedFile out(dir.at("a-dir")); })
            .starts_with("output '" + dir.at("a-dir") + "' is a directory, not a regular file"));
  CHECK(error_of([&] { cbatch::replacement_target(dir.at("to-fifo")); })
            .starts_with("output '" + dir.at("to-fifo") + "' (a symlink to '" + fifo.path() + "') is a named pipe"));
  CHECK(fs::is_fifo(fifo.path()));
  CHECK(fs::is_character_file("/dev/null"));
  CHECK(fs::is_directory(dir.at("a-dir")));
  CHECK(fs::is_empty(dir.at("a-dir")));
  fs::create_symlink("loop-b", dir.at("loop-a"));
  fs::create_symlink("loop-a", dir.at("loop-b"));
  CHECK(error_of([&] { cbatch::replacement_target(dir.at("loop-a")); }).find("too many levels of symlinks") !=
        std::string::npos);
}

TEST_CASE("trace writer: a write error its buffer held back is reported at close, naming the file") {
  cbatch::TraceWriter trace("/dev/full");
  trace.write(cbatch::StepRecord{});  // one short line: it stays in the buffer, so write() cannot fail yet
  CHECK(error_of([&] { trace.close(); }) == "cannot write trace file '/dev/full': No space left on device");
}

TEST_CASE("open_for_writing: a named pipe waits for its reader until the stop flag is raised") {
  const cbatch::test::TempFifo fifo;
  std::atomic<int> stop{0};
  std::thread raise([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop = 15;
  });
  const auto start = std::chrono::steady_clock::now();
  const int fd = cbatch::open_for_writing(fifo.path(), O_WRONLY | O_CLOEXEC, &stop);
  const int err = errno;
  raise.join();
  CHECK(fd == -1);
  CHECK(err == EINTR);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));

  // With a reader, the open returns a blocking descriptor the reader gets the bytes from.
  const int reader = ::open(fifo.path().c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  stop = 0;
  const int writer = cbatch::open_for_writing(fifo.path(), O_WRONLY | O_CLOEXEC, &stop);
  REQUIRE(writer >= 0);
  CHECK((::fcntl(writer, F_GETFL) & O_NONBLOCK) == 0);
  CHECK(::write(writer, "x", 1) == 1);
  char c = 0;
  CHECK(::read(reader, &c, 1) == 1);
  CHECK(c == 'x');
  ::close(writer);
  ::close(reader);
}
