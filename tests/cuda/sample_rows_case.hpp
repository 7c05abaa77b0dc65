// A batch of sampling rows for the device sampler's tests (on the GPU and through the block emulator):
// random logits and parameters with greedy rows, rows with a NaN and rows with penalties over a random
// sequence, optionally constrained rows (random allowed tokens, EOS only at an accepting state, and rows
// where EOS is the only choice), and the tokens the host draws for each row. Includes no CUDA header.
#pragma once
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/constrain/constraint_mask.hpp"
#include "engine/sample/radix_sampling.hpp"
#include "engine/sample/token_mask.hpp"
#include "engine/sample/sampler.hpp"
#include "tests/engine/sampling_cases.hpp"

namespace cbatch::test {

struct SampleRowsCase {
  std::vector<float> logits;                 // (rows, vocab) before penalties
  std::vector<RowSampling> params;           // (rows)
  std::vector<PenaltyToken> penalty_tokens;  // the penalized rows' ranges
  std::vector<uint64_t> token_mask;          // the masked rows' words (RowSampling::mask_offset)
  std::vector<int32_t> want_host;            // (rows) mask, penalties, then sample_row on the host primitives
  std::vector<int32_t> want_sampler;         // (rows) mask, then the Sampler's token; -1 for rows with a NaN
};

// A constraint state with given allowed tokens, for masks made by the engine's rule (constraint_mask.hpp).
class FixedConstraint final : public Constraint {
 public:
  FixedConstraint(std::vector<uint64_t> allowed, bool accepting)
      : allowed_(std::move(allowed)), accepting_(accepting) {}
  int32_t start() const override { return 0; }
  int32_t advance(int32_t, int32_t) override { return 0; }
  bool accepting(int32_t) const override { return accepting_; }
  const std::vector<uint64_t>& allowed(int32_t) override { return allowed_; }

 private:
  std::vector<uint64_t> allowed_;
  bool accepting_;
};

// Row r's mask words (appended to c.token_mask) where r % 3 == 1, else -1: every 4th such row allows
// only EOS (its state accepting, nothing else allowed); the others allow random tokens (1 in 2, or 1 in
// 16), EOS at an accepting state only.
inline int32_t append_random_mask(SampleRowsCase& c, int r, int vocab, std::mt19937& rng) {
  if (r % 3 != 1) return -1;
  const std::vector<int32_t> eos = {std::min(2, vocab - 1)};
  std::vector<uint64_t> allowed(static_cast<size_t>(token_mask_words(vocab)), 0);
  const bool only_eos = r % 12 == 1;
  const unsigned one_in = r % 2 == 0 ? 2 : 16;
  for (int t = 0; t < vocab && !only_eos; ++t) {
    if (rng() % one_in == 0) allowed[static_cast<size_t>(t / 64)] |= uint64_t{1} << (t % 64);
  }
  FixedConstraint constraint(std::move(allowed), only_eos || r % 4 == 1);
  return append_constraint_mask(constraint, 0, eos, vocab, c.token_mask);  // -1 (unmasked) where none came out
}

inline SampleRowsCase make_sample_rows_case(int vocab, int rows, std::mt19937& rng, bool masked = false) {
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
    if (masked) s.mask_offset = append_random_mask(c, r, vocab, rng);
    if (p.has_penalties()) {
      s.penalty_begin = static_cast<int32_t>(c.penalty_tokens.size());
      append_penalty_tokens(tokens, num_prompt, vocab, c.penalty_tokens, slot);
      s.penalty_end = static_cast<int32_t>(c.penalty_tokens.size());
    }
    c.params.push_back(s);
    std::vector<float> masked_row = row;
    if (s.mask_offset >= 0) {
      apply_token_mask(masked_row.data(), vocab, &c.token_mask[static_cast<size_t>(s.mask_offset)]);
    }
    std::vector<float> penalized = masked_row;
    apply_penalty_tokens(penalized.data(), vocab, s, c.penalty_tokens.data());
    radix_sampling::HostRowOps ops(penalized.data(), vocab);
    c.want_host.push_back(radix_sampling::sample_row(ops, s, vocab));
    std::vector<float> scratch = masked_row;
    c.want_sampler.push_back(has_nan ? -1 : sampler.sample(scratch.data(), vocab, p, tokens, num_prompt, seed));
    c.logits.insert(c.logits.end(), row.begin(), row.end());
  }
  return c;
}

}  // namespace cbatch::test
