#include "engine/base/open_for_writing.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace cbatch {

int open_for_writing(const std::string& path, int flags, const std::atomic<int>* stop) {
  for (;;) {
    const int fd = ::open(path.c_str(), flags | O_NONBLOCK, 0644);
    if (fd >= 0) {
      const int status = ::fcntl(fd, F_GETFL);
      if (status >= 0 && ::fcntl(fd, F_SETFL, status & ~O_NONBLOCK) == 0) return fd;
      const int err = errno;
      ::close(fd);
      errno = err;
      return -1;
    }
    // ENXIO from a named pipe: no reader yet. (A device without its driver says ENXIO too: not waited on.)
    struct stat st {};
    if (errno != ENXIO || ::stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;
    if (stop != nullptr && stop->load() != 0) {
      errno = EINTR;
      return -1;
    }
    ::usleep(50 * 1000);
  }
}

}  // namespace cbatch
