// A cheap fingerprint of an input file, written in each shard's summary so that `merge` can tell a shard
// of another input (or of an edited one) from the right one: the size in bytes and a 128-bit hash of
// every byte, computed in one streamed pass (1 MiB reads, word-at-a-time mixing: several GB/s, so a file
// of ten million prompts costs seconds). Not a cryptographic hash: it detects mistakes, not attacks.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace cbatch {

struct InputFingerprint {
  int64_t bytes = 0;
  std::string hash;  // 32 hex digits

  bool operator==(const InputFingerprint&) const = default;
  std::string text() const { return std::to_string(bytes) + " bytes, hash " + hash; }
};

// Throws cbatch::Error naming the path when it cannot be read or is not a regular file (a named pipe, a
// device: the fingerprint would take the bytes the next read needs); "-" (standard input) cannot be.
InputFingerprint fingerprint_file(const std::string& path);

// The same hash over bytes in memory (tests; the file version hashes exactly these bytes).
InputFingerprint fingerprint_bytes(std::string_view bytes);

}  // namespace cbatch
