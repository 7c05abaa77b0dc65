#include "engine/core/stop_checker.hpp"

#include <algorithm>

namespace cbatch {
namespace {

bool is_stop_token(const Sequence& seq, int32_t token, const Tokenizer& tokenizer) {
  const SamplingParams& p = seq.request->sampling;
  if (!p.ignore_eos && tokenizer.is_eos(token)) return true;
  return std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
}

// Earliest stop string that ends in text[from_len - longest + 1, ...): only new text can complete one.
size_t find_stop_string(const std::string& text, size_t old_len, const std::vector<std::string>& stops) {
  size_t best = std::string::npos;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    const size_t from = old_len >= stop.size() - 1 ? old_len - (stop.size() - 1) : 0;
    best = std::min(best, text.find(stop, from));
  }
  return best;
}

}  // namespace

void append_token(Sequence& seq, int32_t token, const Tokenizer& tokenizer) {
  const int32_t prev = seq.tokens.back();
  seq.tokens.push_back(token);
  if (is_stop_token(seq, token, tokenizer)) {
    seq.finish_reason = FinishReason::kStop;
    return;
  }
  const size_t old_len = seq.text.size();
  seq.text += tokenizer.decode_piece(prev, token);
  const size_t stop_at = find_stop_string(seq.text, old_len, seq.request->sampling.stop);
  if (stop_at != std::string::npos) {
    seq.text.resize(stop_at);
    seq.finish_reason = FinishReason::kStop;
    return;
  }
  if (seq.num_tokens() >= seq.max_total_tokens) seq.finish_reason = FinishReason::kLength;
}

}  // namespace cbatch
