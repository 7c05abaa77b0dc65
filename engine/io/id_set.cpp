// IdSet: the fingerprint is two MurmurHash64A passes with different seeds; the table doubles when it
// would pass 3/4 full.
#include "engine/io/id_set.hpp"

#include <cstring>

namespace cbatch {
namespace {

// MurmurHash64A (Austin Appleby, public domain), reading the tail little-endian.
uint64_t murmur64(std::string_view s, uint64_t seed) {
  constexpr uint64_t m = 0xc6a4a7935bd1e995ULL;
  constexpr int r = 47;
  uint64_t h = seed ^ (s.size() * m);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t k;
    std::memcpy(&k, s.data() + i, 8);
    k *= m;
    k ^= k >> r;
    k *= m;
    h ^= k;
    h *= m;
  }
  if (i < s.size()) {
    uint64_t tail = 0;
    for (size_t j = s.size(); j-- > i;) tail = (tail << 8) | static_cast<uint8_t>(s[j]);
    h ^= tail;
    h *= m;
  }
  h ^= h >> r;
  h *= m;
  h ^= h >> r;
  return h;
}

struct Fingerprint {
  uint64_t hi;
  uint64_t lo;
};

Fingerprint fingerprint(std::string_view id) {
  Fingerprint f{murmur64(id, 0x243f6a8885a308d3ULL), murmur64(id, 0x13198a2e03707344ULL)};
  if (f.hi == 0 && f.lo == 0) f.lo = 1;  // (0, 0) marks an empty slot
  return f;
}

}  // namespace

const IdSet::Slot* IdSet::find(std::string_view id) const {
  if (slots_.empty()) return nullptr;
  const Fingerprint f = fingerprint(id);
  const size_t mask = slots_.size() - 1;
  for (size_t i = f.hi & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.hi == 0 && slot.lo == 0) return nullptr;
    if (slot.hi == f.hi && slot.lo == f.lo) return &slot;
  }
}

int64_t IdSet::line_of(std::string_view id) const {
  const Slot* slot = find(id);
  return slot != nullptr ? slot->line : -1;
}

bool IdSet::insert(std::string_view id, int64_t line) {
  if (4 * (size_ + 1) > 3 * slots_.size()) grow();
  const Fingerprint f = fingerprint(id);
  const size_t mask = slots_.size() - 1;
  for (size_t i = f.hi & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.hi == f.hi && slot.lo == f.lo) return false;
    if (slot.hi == 0 && slot.lo == 0) {
      slot = {f.hi, f.lo, line};
      ++size_;
      return true;
    }
  }
}

void IdSet::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.hi == 0 && s.lo == 0) continue;
    size_t i = s.hi & mask;
    while (slots_[i].hi != 0 || slots_[i].lo != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace cbatch
