// OutputFileLock: a second lock on the same output fails with a message naming the file, until the
// first is released; standard output and /dev/null take no lock.
#include <doctest/doctest.h>

#include <filesystem>

#include "engine/base/error.hpp"
#include "engine/io/output_lock.hpp"
#include "temp_file.hpp"

TEST_CASE("output lock: one holder at a time, released with its owner") {
  cbatch::test::TempFile file("");
  std::filesystem::remove(file.path());  // the lock creates it
  {
    const cbatch::OutputFileLock first(file.path());
    CHECK(std::filesystem::exists(file.path()));
    try {
      const cbatch::OutputFileLock second(file.path());
      FAIL("a second lock on the same file succeeded");
    } catch (const cbatch::Error& e) {
      const std::string message = e.what();
      CHECK(message.find("'" + file.path() + "' is in use by another cbatch run") != std::string::npos);
    }
    const cbatch::OutputFileLock stdout_lock("-");
    const cbatch::OutputFileLock stdout_again("-");
    const cbatch::OutputFileLock null_lock("/dev/null");  // not a regular file: no lock, so no conflict
    const cbatch::OutputFileLock null_again("/dev/null");
  }
  const cbatch::OutputFileLock again(file.path());
}
