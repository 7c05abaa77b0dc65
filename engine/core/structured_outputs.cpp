#include "engine/core/structured_outputs.hpp"

#include <span>

#include "engine/base/error.hpp"
#include "engine/constrain/constraint_mask.hpp"
#include "engine/sample/token_mask.hpp"

namespace cbatch {

ConstraintCache& StructuredOutputs::constraints() {
  if (!constraints_) constraints_ = std::make_unique<ConstraintCache>(std::make_shared<TokenTrie>(*model_.tokenizer));
  return *constraints_;
}

std::string StructuredOutputs::attach(Sequence& seq) {
  if (!seq.request->sampling.is_constrained()) return "";
  try {
    seq.constraint = constraints().get(seq.request->sampling.constraint);
  } catch (const Error& e) {
    return e.what();
  }
  seq.constraint_state = seq.constraint->start();
  if (reasoning_ != nullptr && seq.request->is_chat && !reasoning_->prompt_closes_thinking(seq.prompt())) {
    seq.constraint_after_thinking = std::move(seq.constraint);
    seq.constraint = nullptr;
  }
  return "";
}

void StructuredOutputs::on_token(Sequence& seq, int32_t token, size_t old_text_size) {
  if (seq.constraint && !model_.tokenizer->is_eos(token)) {
    seq.constraint_state = seq.constraint->advance(seq.constraint_state, token);
    if (seq.constraint_state == ByteDfa::kDead) {  // a backend that drew outside the step's mask
      throw Error("internal error: token " + std::to_string(token) + " drawn for line " +
                  std::to_string(seq.request->line) + " is outside its structured-output constraint");
    }
  }
  if (!seq.constraint_after_thinking) return;
  const std::span<const int32_t> output(seq.tokens.data() + seq.num_prompt_tokens,
                                        static_cast<size_t>(seq.num_generated()));
  if (!reasoning_->ends_thinking(output, seq.text, old_text_size)) return;
  seq.constraint = std::move(seq.constraint_after_thinking);
  seq.constraint_after_thinking = nullptr;
  seq.constraint_state = seq.constraint->start();
}

bool StructuredOutputs::mask_logits(const Sequence& seq, float* logits) {
  const int vocab = model_.config.vocab_size;
  mask_words_.resize(static_cast<size_t>(token_mask_words(vocab)));
  const bool any = constraint_token_mask(*seq.constraint, seq.constraint_state, model_.tokenizer->eos_ids(), vocab,
                                         mask_words_.data());
  apply_token_mask(logits, vocab, mask_words_.data());
  return any;
}

}  // namespace cbatch
