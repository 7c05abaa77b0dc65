// Decoder rerankers (Qwen3-Reranker kind): a causal LM asked whether a document meets a query, scored as
// softmax over the logits of its "yes" and "no" tokens at the last prompt position. Each kind is a row of
// data: its prompt template (placeholders {instruction}, {query}, {document}), the instruction it uses by
// default, and the texts of its two answer tokens. RerankFormat is a row resolved against a vocabulary.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/tokenizer.hpp"

namespace cbatch {

struct RerankTemplate {
  std::string_view name;         // --reranker value
  std::string_view prompt;       // the whole prompt, placeholders {instruction} {query} {document}
  std::string_view instruction;  // the default {instruction}
  std::string_view yes_token;    // the vocabulary texts of the two answer tokens
  std::string_view no_token;
};

// The rows cbatch knows; find_rerank_template(name) returns null for another name.
const std::vector<RerankTemplate>& rerank_templates();
const RerankTemplate* find_rerank_template(std::string_view name);

struct RerankFormat {
  const RerankTemplate* row = nullptr;
  std::array<int32_t, 2> yes_no_ids = {-1, -1};

  // The prompt text of one (query, document) pair.
  std::string render(std::string_view query, std::string_view document) const;
};

// Finds the answer tokens in the vocabulary; throws Error naming the missing one.
RerankFormat resolve_rerank_format(const RerankTemplate& row, const Tokenizer& tokenizer);

}  // namespace cbatch
