#include "engine/io/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

OutputFileLock::OutputFileLock(const std::string& path) {
  if (path == "-") return;
  // O_NONBLOCK: an open for reading of a named pipe would wait for a writer, and the reader at its other
  // end (`cat FIFO`) waits for one too. Regular files ignore the flag.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open output file '" + elide(path) + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && !S_ISREG(st.st_mode)) {  // /dev/null, a pipe: no results to guard
    ::close(fd_);
    fd_ = -1;
    return;
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  ::close(fd_);
  fd_ = -1;
  if (err == EWOULDBLOCK) {
    throw Error("output file '" + path + "' is in use by another cbatch run (wait for it to end, or stop it)");
  }
  throw Error("cannot lock output file '" + path + "': " + std::strerror(err));
}

OutputFileLock::~OutputFileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace cbatch
