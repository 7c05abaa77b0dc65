// MappedFile::release: the whole pages inside a range leave the process's resident memory (the mapping's Rss
// in /proc/self/smaps drops), the pages at its partial edges stay, and the bytes read back unchanged.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/base/mapped_file.hpp"
#include "temp_file.hpp"

namespace cbatch {
namespace {

// Resident kB of the mapping that starts at `start` (/proc/self/smaps), or -1 when not found.
long resident_kb(const uint8_t* start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(" kB") == std::string::npos && (head >> std::hex >> begin >> dash >> end) && dash == '-') {
      in_mapping = begin == reinterpret_cast<uintptr_t>(start);
      continue;
    }
    if (in_mapping && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

TEST_CASE("MappedFile::release gives back the whole pages of a range, and they read back the same") {
  const long page = ::sysconf(_SC_PAGESIZE);
  std::string bytes(static_cast<size_t>(64 * page), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  const test::TempFile file(bytes, ".bin");
  const MappedFile mapped(file.path());
  long sum = 0;
  for (size_t i = 0; i < mapped.size(); i += static_cast<size_t>(page)) sum += mapped.data()[i];  // all resident
  CHECK(sum != 0);
  const long before = resident_kb(mapped.data());
  REQUIRE(before >= 64 * page / 1024);
  // From the middle of page 8 to the middle of page 40: pages 9..39 (31 whole pages) go.
  mapped.release(mapped.data() + 8 * page + page / 2, static_cast<size_t>(32 * page));
  CHECK(resident_kb(mapped.data()) == before - 31 * page / 1024);
  CHECK(std::string(reinterpret_cast<const char*>(mapped.data()), mapped.size()) == bytes);
}

}  // namespace
}  // namespace cbatch
