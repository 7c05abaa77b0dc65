#include "engine/base/replaced_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/base/file_type.hpp"

namespace cbatch {
namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;
constexpr int kMaxSymlinkHops = 40;  // as the kernel's ELOOP limit

// Follows the last component's symlinks only: a symlinked directory above it is fine for a rename.
std::filesystem::path follow_symlinks(const std::string& path) {
  std::filesystem::path p = path;
  for (int hops = 0; hops < kMaxSymlinkHops; ++hops) {
    std::error_code ec;
    if (!std::filesystem::is_symlink(p, ec)) return p;
    const std::filesystem::path next = std::filesystem::read_symlink(p, ec);
    if (ec) throw Error("cannot read the symlink '" + elide(p.string()) + "': " + ec.message());
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  throw Error("output '" + elide(path) + "': too many levels of symlinks");
}

}  // namespace

std::string replacement_target(const std::string& path) {
  const std::string target = follow_symlinks(path).string();
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return target;
  const std::string via = target == path ? "" : " (a symlink to '" + elide(target) + "')";
  throw Error("output '" + elide(path) + "'" + via + " is " + file_type_name(st.st_mode) +
              ", not a regular file: the output is written whole to a new file that then replaces the old one, "
              "which would destroy it; give the path of a regular file or of a new one");
}

ReplacedFile::ReplacedFile(const std::string& path) : path_(path), target_(replacement_target(path)) {
  temp_ = target_ + ".cbatch-tmp-" + std::to_string(::getpid());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error("cannot create the temporary file '" + elide(temp_) + "' for '" + elide(path_) + "': " +
                std::strerror(errno));
  }
  buffer_.reserve(kFlushBytes);
}

ReplacedFile::~ReplacedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void ReplacedFile::append(std::string_view bytes) {
  buffer_.append(bytes);
  if (buffer_.size() >= kFlushBytes) flush();
}

void ReplacedFile::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(errno);
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void ReplacedFile::commit() {
  flush();
  struct stat st {};
  if (::stat(target_.c_str(), &st) == 0) {
    replacement_target(path_);  // still a regular file? (it was one when the write began)
    if (::fchmod(fd_, st.st_mode & 07777) != 0) fail(errno);
  }
  if (::fdatasync(fd_) != 0) fail(errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) fail(errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    throw Error("cannot rename '" + elide(temp_) + "' onto '" + elide(target_) + "': " + std::strerror(errno));
  }
  temp_.clear();
}

void ReplacedFile::fail(int err) const {
  throw Error("cannot write output file '" + elide(path_) + "': " + std::strerror(err));
}

}  // namespace cbatch
