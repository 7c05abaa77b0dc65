// Python's `random` module as far as ShareGPT sampling needs it: MT19937 seeded from an integer the way
// CPython's random.seed(int) seeds it (init_by_array over the integer's 32-bit words, least significant
// first), getrandbits(k) for k <= 32, random(), normalvariate() and random.shuffle. With the same seed, shuffle() puts a list in
// the order Python puts it in, so our ShareGPT sample is the one vLLM's benchmark draws from the same file.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cbatch {

class PythonRandom {
 public:
  explicit PythonRandom(uint64_t seed);

  uint32_t next_u32();               // genrand_uint32
  uint32_t getrandbits(int k);       // 1 <= k <= 32
  uint32_t randbelow(uint32_t n);    // uniform in [0, n), n >= 1, by rejection as Python does
  double random();                   // [0, 1) from 53 bits, as random.random()
  double normalvariate(double mu, double sigma);  // Kinderman and Monahan's ratio method, as Python's

  // Fisher-Yates from the back, as random.shuffle.
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i-- > 1;) {
      const size_t j = randbelow(static_cast<uint32_t>(i + 1));
      std::swap(items[i], items[j]);
    }
  }

 private:
  static constexpr int kStateWords = 624;
  void init_genrand(uint32_t seed);
  void init_by_array(const std::vector<uint32_t>& key);
  void refill();

  std::array<uint32_t, kStateWords> state_{};  // (624,) the Mersenne twister's state words
  int next_ = kStateWords;                     // index of the next word to temper; 624: refill first
};

}  // namespace cbatch
