// Outputs to named pipes: open_for_writing waits for a pipe's reader only until the stop flag is raised.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "engine/base/open_for_writing.hpp"
#include "fifo.hpp"

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
