// A named pipe under the system temp directory, removed when the test ends, and a time limit for calls
// that hang when they wait on one: a call that would block forever fails the test instead of hanging it.
#pragma once
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

namespace cbatch::test {

class TempFifo {
 public:
  TempFifo() {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("cbatch_test_" + std::to_string(::getpid()) + "_fifo" + std::to_string(counter++)))
                .string();
    REQUIRE(::mkfifo(path_.c_str(), 0600) == 0);
  }
  ~TempFifo() { ::unlink(path_.c_str()); }
  TempFifo(const TempFifo&) = delete;
  TempFifo& operator=(const TempFifo&) = delete;
  const std::string& path() const { return path_; }

  // Opens and closes the write end without waiting: an open() for reading blocked on the pipe returns.
  void release_readers() const {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }

 private:
  std::string path_;
};

// Runs fn on a thread; true when it returns (or throws) within `seconds`. Otherwise `release` is called
// (to unblock an open() on a pipe, say) and, if fn still does not return, the thread is left behind: the
// test fails instead of hanging, and the process ends with it.
template <class Fn, class Release>
bool finishes_within(double seconds, Fn fn, Release release) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread worker([fn, done]() mutable {
    try {
      fn();
    } catch (...) {
      done->set_exception(std::current_exception());
      return;
    }
    done->set_value();
  });
  if (finished.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready) {
    worker.join();
    return true;
  }
  release();
  if (finished.wait_for(std::chrono::seconds(2)) == std::future_status::ready) {
    worker.join();
  } else {
    worker.detach();
  }
  return false;
}

}  // namespace cbatch::test
