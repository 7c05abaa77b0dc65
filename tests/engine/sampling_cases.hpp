// Random sampling cases shared by the sampler tests and the device-sampling tests: logits of the kinds a
// sampler meets, parameters that exercise every filter, and sequences and penalties.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/base/sampling_params.hpp"

namespace cbatch::test {

// Logits of four kinds: peaked like a language model's, flat, coarse (many exact ties), and peaked with
// a quarter of the vocabulary masked to -inf.
inline std::vector<float> random_logits(int vocab, int kind, std::mt19937& rng) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::normal_distribution<float> normal(0.0f, kind == 1 ? 0.5f : 3.0f);
  for (float& l : logits) l = normal(rng);
  if (kind == 0 || kind == 3) {  // a few strong candidates on top of a low tail
    for (int i = 0; i < 8; ++i) logits[std::uniform_int_distribution<int>(0, vocab - 1)(rng)] += 12.0f;
  } else if (kind == 2) {
    for (float& l : logits) l = std::round(l);
  }
  if (kind == 3) {
    for (int i = 0; i < vocab / 4; ++i) {
      logits[std::uniform_int_distribution<int>(0, vocab - 1)(rng)] = -std::numeric_limits<float>::infinity();
    }
  }
  return logits;
}

// Temperature in [0.2, 1.5]; top-k on one trial in 4, top-p on two in 3, min-p on one in 5.
inline SamplingParams random_sampling_params(int trial, int vocab, std::mt19937& rng) {
  SamplingParams p;
  p.temperature = std::uniform_real_distribution<float>(0.2f, 1.5f)(rng);
  p.top_k = trial % 4 == 0 ? std::uniform_int_distribution<int>(1, vocab + 5)(rng) : -1;
  p.top_p = trial % 3 == 0 ? 1.0f : std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
  p.min_p = trial % 5 == 0 ? std::uniform_real_distribution<float>(0.0f, 0.5f)(rng) : 0.0f;
  return p;
}

// A random sequence of `length` tokens, repeating ids below min(vocab, 40), for penalties.
inline std::vector<int32_t> random_sequence(int length, int vocab, std::mt19937& rng) {
  std::vector<int32_t> tokens(static_cast<size_t>(length));
  for (int32_t& t : tokens) t = std::uniform_int_distribution<int32_t>(0, std::min(vocab, 40) - 1)(rng);
  return tokens;
}

// Penalties on one trial in 3: repetition in [0.5, 2], frequency and presence in [-2, 2].
inline void random_penalties(int trial, SamplingParams& p, std::mt19937& rng) {
  if (trial % 3 != 1) return;
  p.repetition_penalty = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
  p.frequency_penalty = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  p.presence_penalty = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
}

}  // namespace cbatch::test
