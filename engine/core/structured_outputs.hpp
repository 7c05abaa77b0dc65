// The run's structured outputs: each constrained sequence's automaton (compiled once per distinct
// constraint, over the tokenizer's vocabulary trie built at the first constrained request), its state as
// tokens are appended, and the masks that keep its logits inside the constraint. Under a reasoning parser a
// chat's constraint applies to the answer only: it waits until the thinking ends, unless the prompt already
// closed it (Qwen3 with enable_thinking false).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/constrain/constraint_cache.hpp"
#include "engine/constrain/token_automaton.hpp"
#include "engine/core/sequence.hpp"
#include "engine/model/model.hpp"
#include "engine/text/reasoning_parser.hpp"

namespace cbatch {

class StructuredOutputs {
 public:
  // reasoning: the run's parser, or nullptr.
  StructuredOutputs(const Model& model, const ReasoningParser* reasoning) : model_(model), reasoning_(reasoning) {}

  // Gives a constrained sequence its automaton (deferred while it thinks); the error message ("" when
  // none) when the constraint does not compile.
  std::string attach(Sequence& seq);
  // After `token` was appended (old_text_size: the text's size before): advances the automaton, and
  // starts a deferred one once the thinking ended. Throws on a token the constraint did not allow.
  void on_token(Sequence& seq, int32_t token, size_t old_text_size);
  // Masks a constrained row's logits: tokens that cannot continue get -inf, EOS stays only where the
  // output is a full match. Returns false when no token at all is allowed.
  bool mask_logits(const Sequence& seq, float* logits);

 private:
  ConstraintCache& constraints();

  const Model& model_;
  const ReasoningParser* reasoning_;
  std::unique_ptr<ConstraintCache> constraints_;  // made at the first constrained request
  std::vector<uint64_t> mask_words_;              // (token_mask_words(vocab)) scratch of mask_logits
};

}  // namespace cbatch
