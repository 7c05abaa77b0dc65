// Helpers of the libFuzzer targets: the input as a file or as the files of a directory (the loaders take
// paths; an in-memory memfd keeps the fuzz loop off the disk), and a check that aborts with a message, which
// libFuzzer reports as a finding together with the input that caused it.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace cbatch::fuzz {

// A file in memory, reachable by path as /proc/self/fd/N; rewritten for every input.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& write(const uint8_t* data, size_t size) const {
    if (ftruncate(fd_, 0) != 0 || (size > 0 && pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size))) {
      std::perror("memfd write");
      std::abort();
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// A temporary directory whose named files link to in-memory ones (MemFile), for loaders that read a directory
// by file name; removed at exit (a crash leaves it behind).
class MemDirectory {
 public:
  MemDirectory(const char* tag, std::initializer_list<const char*> names) {
    std::string pattern = std::string("/tmp/cbatch-fuzz-") + tag + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = pattern;
    for (const char* name : names) {
      files_.push_back(std::make_unique<MemFile>(name));
      std::filesystem::create_symlink(files_.back()->path(), std::filesystem::path(path_) / name);
    }
  }
  ~MemDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  MemDirectory(const MemDirectory&) = delete;
  MemDirectory& operator=(const MemDirectory&) = delete;

  const MemFile& file(size_t i) const { return *files_.at(i); }  // in the order named
  const std::string& path() const { return path_; }

 private:
  std::vector<std::unique_ptr<MemFile>> files_;
  std::string path_;
};

// An input framed as two files: a little-endian uint16 n, n bytes of the first (n past the end: all that is
// there), then the second.
struct TwoFiles {
  const uint8_t* first;
  size_t first_size;
  const uint8_t* second;
  size_t second_size;
};

inline TwoFiles split_two_files(const uint8_t* data, size_t size) {
  if (size < 2) return {data, size, data + size, 0};
  const size_t n = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
  return {data + 2, n, data + 2 + n, size - 2 - n};
}

// Both files of a framed input written into the first two files of a directory.
inline void write_two_files(const MemDirectory& dir, const uint8_t* data, size_t size) {
  const TwoFiles files = split_two_files(data, size);
  dir.file(0).write(files.first, files.first_size);
  dir.file(1).write(files.second, files.second_size);
}

inline void require(bool condition, const char* what, const std::string& detail = "") {
  if (condition) return;
  std::fprintf(stderr, "fuzz property violated: %s %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace cbatch::fuzz
