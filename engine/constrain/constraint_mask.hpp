// The tokens a constrained row may draw at its constraint's state, as one bitmask (engine/sample/
// token_mask.hpp) that both sampling paths apply: the host to the logits before its Sampler, the device
// sampler from the words the engine sends with the step (StepRequest::token_mask).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/constrain/token_automaton.hpp"

namespace cbatch {

// Writes token_mask_words(vocab) words: the constraint's allowed tokens at `state`, with each EOS id
// (those in [0, vocab)) allowed exactly when the output so far is a full match, whatever its bytes.
// Returns whether any token is allowed.
bool constraint_token_mask(Constraint& constraint, int32_t state, const std::vector<int32_t>& eos_ids, int vocab,
                           uint64_t* words);

// Appends the row's words to `mask` and returns their offset; where no token is allowed appends
// nothing and returns -1.
int32_t append_constraint_mask(Constraint& constraint, int32_t state, const std::vector<int32_t>& eos_ids, int vocab,
                               std::vector<uint64_t>& mask);

}  // namespace cbatch
