// An output written whole and put in place at the end (merge's output): the bytes go to a temporary file
// beside the final one, which commit() syncs and renames onto it, so a reader sees the old file or the
// new one, never half of one, and a failed or interrupted write leaves the old one. The final file is the
// output path with its symlinks followed: the link stays and its target is replaced (a dangling link
// makes the file it names), and the new file keeps the replaced one's permission bits (0644 less the
// umask when there was none). Only a regular file (or a missing one) can be replaced this way: a rename
// onto a device, a named pipe or a directory would destroy it, so those are refused, before anything is
// written. A ReplacedFile destroyed without commit() removes its temporary file.
#pragma once
#include <string>
#include <string_view>

namespace cbatch {

// The file an output path names once its symlinks are followed. Throws cbatch::Error naming the path when
// that exists and is not a regular file, or on a symlink loop.
std::string replacement_target(const std::string& path);

class ReplacedFile {
 public:
  explicit ReplacedFile(const std::string& path);  // throws cbatch::Error (see replacement_target)
  ~ReplacedFile();
  ReplacedFile(const ReplacedFile&) = delete;
  ReplacedFile& operator=(const ReplacedFile&) = delete;

  void append(std::string_view bytes);
  // Writes what is buffered, syncs, sets the permission bits, renames onto the target. Throws cbatch::Error.
  void commit();

 private:
  void flush();
  [[noreturn]] void fail(int err) const;

  std::string path_;    // as given, for messages
  std::string target_;  // path_ with its symlinks followed: what the rename replaces
  std::string temp_;    // beside target_, so the rename stays within one directory
  int fd_ = -1;
  std::string buffer_;  // (< 1 MiB) bytes not yet written
};

}  // namespace cbatch
