// An exclusive lock on the output file for the whole run (flock, advisory, released by the kernel when
// the process dies, kill -9 included), so that a second cbatch started on the same output, by mistake
// or by an eager restart script, fails at once instead of truncating or interleaving the first one's
// results. Taken before --resume reads the file back.
#pragma once
#include <string>

namespace cbatch {

class OutputFileLock {
 public:
  // Creates the file if needed. Throws cbatch::Error when another process holds the lock, or when the
  // file cannot be opened. "-" (standard output) and files that are not regular files (/dev/null, a
  // named pipe) take no lock: they keep no results, and runs writing to /dev/null must not exclude each other.
  explicit OutputFileLock(const std::string& path);
  ~OutputFileLock();
  OutputFileLock(const OutputFileLock&) = delete;
  OutputFileLock& operator=(const OutputFileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace cbatch
