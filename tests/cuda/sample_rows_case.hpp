// A batch of sampling rows for the device sampler's tests (on the GPU and through the block emulator):
// random logits and parameters with greedy rows, rows with a NaN and rows with penalties over a random
// sequence, and the tokens the host draws for each row. Includes no CUDA header.
#pragma once
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/sample/radix_sampling.hpp"
#include "engine/sample/sampler.hpp"
#include "tests/engine/sampling_cases.hpp"

namespace cbatch::test {

struct SampleRowsCase {
  std::vector<float> logits;                 // (rows, vocab) before penalties
  std::vector<RowSampling> params;           // (rows)
  std::vector<PenaltyToken> penalty_tokens;  // the penalized rows' ranges
  std::vector<int32_t> want_host;            // (rows) penalties, then sample_row on the host primitives
  std::vector<int32_t> want_sampler;         // (rows) the Sampler's token; -1 for rows with a NaN
};

inline SampleRowsCase make_sample_rows_case(int vocab, int rows, std::mt19937& rng) {
  SampleRowsCase c;
  Sampler sampler;
  std::vector<int32_t> slot;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row = random_logits(vocab, r % 4, rng);
    const bool has_nan = r % 7 == 3;
    if (has_nan) row[static_cast<size_t>(r % vocab)] = std::numeric_limits<float>::quiet_NaN();
    SamplingParams p = random_sampling_params(r, vocab, rng);
    if (r % 9 == 0) p.temperature = 0.0f;
    random_penalties(r, p, rng);
    const int num_prompt = 1 + r % 4;
    const std::vector<int32_t> tokens = random_sequence(num_prompt + r % 5, vocab, rng);
    const uint64_t seed = rng();
    RowSampling s = row_sampling(p, seed, static_cast<int64_t>(tokens.size()) - num_prompt);
    if (p.has_penalties()) {
      s.penalty_begin = static_cast<int32_t>(c.penalty_tokens.size());
      append_penalty_tokens(tokens, num_prompt, vocab, c.penalty_tokens, slot);
      s.penalty_end = static_cast<int32_t>(c.penalty_tokens.size());
    }
    c.params.push_back(s);
    std::vector<float> penalized = row;
    apply_penalty_tokens(penalized.data(), vocab, s, c.penalty_tokens.data());
    radix_sampling::HostRowOps ops(penalized.data(), vocab);
    c.want_host.push_back(radix_sampling::sample_row(ops, s, vocab));
    std::vector<float> scratch = row;
    c.want_sampler.push_back(has_nan ? -1 : sampler.sample(scratch.data(), vocab, p, tokens, num_prompt, seed));
    c.logits.insert(c.logits.end(), row.begin(), row.end());
  }
  return c;
}

}  // namespace cbatch::test
