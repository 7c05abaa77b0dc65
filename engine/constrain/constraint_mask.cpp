#include "engine/constrain/constraint_mask.hpp"

#include "engine/sample/token_mask.hpp"

namespace cbatch {

bool constraint_token_mask(Constraint& constraint, int32_t state, const std::vector<int32_t>& eos_ids, int vocab,
                           uint64_t* words) {
  const std::vector<uint64_t>& allowed = constraint.allowed(state);
  const int n = token_mask_words(vocab);
  for (int w = 0; w < n; ++w) words[w] = static_cast<size_t>(w) < allowed.size() ? allowed[static_cast<size_t>(w)] : 0;
  if (vocab % 64 != 0) words[n - 1] &= (uint64_t{1} << (vocab % 64)) - 1;  // no bits past the vocabulary
  const bool eos_ok = constraint.accepting(state);
  for (int32_t id : eos_ids) {
    if (id < 0 || id >= vocab) continue;
    const uint64_t bit = uint64_t{1} << (id % 64);
    words[id / 64] = eos_ok ? words[id / 64] | bit : words[id / 64] & ~bit;
  }
  bool any = false;
  for (int w = 0; w < n; ++w) any = any || words[w] != 0;
  return any;
}

int32_t append_constraint_mask(Constraint& constraint, int32_t state, const std::vector<int32_t>& eos_ids, int vocab,
                               std::vector<uint64_t>& mask) {
  const size_t offset = mask.size();
  mask.resize(offset + static_cast<size_t>(token_mask_words(vocab)));
  if (constraint_token_mask(constraint, state, eos_ids, vocab, mask.data() + offset)) {
    return static_cast<int32_t>(offset);
  }
  mask.resize(offset);
  return -1;
}

}  // namespace cbatch
