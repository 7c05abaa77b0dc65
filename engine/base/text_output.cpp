#include "engine/base/text_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

[[noreturn]] void fail(const std::string& path, int err) {
  throw Error("cannot write '" + elide(path) + "': " + std::strerror(err));
}

}  // namespace

void write_text_file(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && errno != EINTR) fail(path, errno);  // NFS reports a full disk here
}

void flush_standard_output() {
  if (std::fflush(stdout) != 0) throw Error(std::string("cannot write standard output: ") + std::strerror(errno));
  // A write that failed earlier dropped its buffer: the flush has nothing left to fail on, but the flag stays.
  if (std::ferror(stdout) != 0) throw Error("cannot write standard output: a write to it failed");
}

}  // namespace cbatch
