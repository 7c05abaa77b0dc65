#include "engine/bench/python_random.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace cbatch {

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key;
  for (uint64_t rest = seed; rest != 0; rest >>= 32) key.push_back(static_cast<uint32_t>(rest));
  if (key.empty()) key.push_back(0);  // random.seed(0) seeds with the one-word key [0]
  init_by_array(key);
}

void PythonRandom::init_genrand(uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kStateWords; ++i) {
    state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  next_ = kStateWords;
}

// The reference MT19937 array seeding (Matsumoto and Nishimura, 2002), which CPython uses.
void PythonRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218u);
  int i = 1;
  size_t j = 0;
  const int n = kStateWords;
  for (int k = std::max<int>(n, static_cast<int>(key.size())); k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= n) {
      state_[0] = state_[n - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = n - 1; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= n) {
      state_[0] = state_[n - 1];
      i = 1;
    }
  }
  state_[0] = 0x80000000u;  // the first word's low bits are unused: a non-zero state is guaranteed
}

void PythonRandom::refill() {
  constexpr int kShift = 397;
  constexpr uint32_t kMatrix = 0x9908b0dfu;
  auto twist = [&](int i, int i1, int im) {
    const uint32_t y = (state_[i] & 0x80000000u) | (state_[i1] & 0x7fffffffu);
    state_[i] = state_[im] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
  };
  for (int i = 0; i < kStateWords; ++i) twist(i, (i + 1) % kStateWords, (i + kShift) % kStateWords);
  next_ = 0;
}

uint32_t PythonRandom::next_u32() {
  if (next_ >= kStateWords) refill();
  uint32_t y = state_[next_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint32_t PythonRandom::getrandbits(int k) {
  assert(k >= 1 && k <= 32);
  return next_u32() >> (32 - k);
}

double PythonRandom::random() {
  const uint32_t a = next_u32() >> 5;
  const uint32_t b = next_u32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

double PythonRandom::normalvariate(double mu, double sigma) {
  const double magic = 4 * std::exp(-0.5) / std::sqrt(2.0);
  double z = 0;
  while (true) {
    const double u1 = random();
    const double u2 = 1.0 - random();
    z = magic * (u1 - 0.5) / u2;
    if (z * z / 4.0 <= -std::log(u2)) break;
  }
  return mu + z * sigma;
}

uint32_t PythonRandom::randbelow(uint32_t n) {
  assert(n >= 1);
  int bits = 0;
  for (uint32_t rest = n; rest != 0; rest >>= 1) ++bits;  // n.bit_length()
  uint32_t r = getrandbits(bits);
  while (r >= n) r = getrandbits(bits);
  return r;
}

}  // namespace cbatch
