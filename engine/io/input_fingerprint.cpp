// Two 64-bit lanes, each mixing one little-endian 8-byte word at a time with its own odd multiplier and
// rotation; the tail is padded with zeros and the length is folded in at the end, then each lane gets a
// final avalanche (murmur3's fmix64 constants).
#include "engine/io/input_fingerprint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/base/file_type.hpp"

namespace cbatch {
namespace {

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

class StreamHash {
 public:
  // Whole words only, except in the last call.
  void update(const unsigned char* data, size_t size) {
    size_t i = 0;
    for (; i + 8 <= size; i += 8) mix(load(data + i, 8));
    if (i < size) mix(load(data + i, size - i));
    bytes_ += static_cast<int64_t>(size);
  }
  InputFingerprint finish() const {
    const uint64_t a = fmix64(a_ ^ static_cast<uint64_t>(bytes_));
    const uint64_t b = fmix64(b_ + static_cast<uint64_t>(bytes_));
    char hex[33];
    std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
    return {bytes_, hex};
  }

 private:
  static uint64_t load(const unsigned char* p, size_t n) {
    uint64_t w = 0;
    for (size_t k = 0; k < n; ++k) w |= static_cast<uint64_t>(p[k]) << (8 * k);
    return w;
  }
  void mix(uint64_t w) {
    a_ = rotl(a_ ^ (w * 0x87c37b91114253d5ULL), 31) * 0x9e3779b97f4a7c15ULL;
    b_ = rotl(b_ + (w * 0x4cf5ad432745937fULL), 27) * 0xc2b2ae3d27d4eb4fULL + a_;
  }

  uint64_t a_ = 0x243f6a8885a308d3ULL;
  uint64_t b_ = 0x13198a2e03707344ULL;
  int64_t bytes_ = 0;
};

}  // namespace

InputFingerprint fingerprint_file(const std::string& path) {
  if (path == "-") throw Error("standard input cannot be fingerprinted: give the prompts as a file");
  // O_NONBLOCK: a named pipe is refused below, not waited on (regular files ignore the flag).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + elide(path) + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    ::close(fd);  // a pipe's bytes would be gone for the run that reads them next; a device may never end
    throw Error("the input is read twice (once for its fingerprint), so it must be a regular file: '" + elide(path) +
                "' is " + file_type_name(st.st_mode) + ", not a regular file");
  }
  std::vector<unsigned char> buffer(size_t{1} << 20);  // a multiple of 8: only the last read is partial
  StreamHash hash;
  size_t filled = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data() + filled, buffer.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error("cannot read '" + path + "': " + std::strerror(err));
    }
    filled += static_cast<size_t>(n);
    if (n == 0 || filled == buffer.size()) {
      hash.update(buffer.data(), filled);
      if (n == 0) break;
      filled = 0;
    }
  }
  ::close(fd);
  return hash.finish();
}

InputFingerprint fingerprint_bytes(std::string_view bytes) {
  StreamHash hash;
  hash.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return hash.finish();
}

}  // namespace cbatch
