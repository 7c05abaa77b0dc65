// OutputFileLock: a second lock on the same output fails with a message naming the file, until the
// first is released; standard output, /dev/null and named pipes take no lock, and a named pipe with no
// writer does not make the lock wait for one.
#include <doctest/doctest.h>

#include <filesystem>

#include "engine/base/error.hpp"
#include "engine/io/output_lock.hpp"
#include "fifo.hpp"
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

TEST_CASE("output lock: a named pipe takes no lock and does not wait for a writer") {
  const cbatch::test::TempFifo fifo;
  // An open for reading waits until the pipe has a writer; the reader at the other end of `-o FIFO`
  // (cat FIFO) waits for one too, so a lock that opened the pipe that way would never return.
  const bool returned = cbatch::test::finishes_within(5, [&] {
    const cbatch::OutputFileLock lock(fifo.path());
    const cbatch::OutputFileLock again(fifo.path());
  }, [&] { fifo.release_readers(); });
  CHECK_MESSAGE(returned, "the output lock waited for a writer on the named pipe");
}
