// A set of request ids (their id_json text) with the line that first named each, for duplicate
// detection and --resume over inputs of millions of lines. Ids are stored as 128-bit fingerprints in
// one flat open-addressing table (24 bytes a slot, load <= 3/4), never as strings: a million ids take
// about 48 MB. Two distinct ids share a fingerprint with probability ~n^2 / 2^129 (1e-27 at n = 1e6).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace cbatch {

class IdSet {
 public:
  // Adds id with its line; false when the id is already present (the set keeps the first line).
  bool insert(std::string_view id, int64_t line);
  bool contains(std::string_view id) const { return find(id) != nullptr; }
  // The line stored with id, or -1 when absent.
  int64_t line_of(std::string_view id) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hi = 0;   // fingerprint; hi == lo == 0 marks an empty slot (a real zero pair is remapped)
    uint64_t lo = 0;
    int64_t line = 0;
  };
  const Slot* find(std::string_view id) const;
  void grow();

  std::vector<Slot> slots_;  // (capacity, a power of two) linear probing from hi & (capacity - 1)
  size_t size_ = 0;
};

}  // namespace cbatch
