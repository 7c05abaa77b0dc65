#include "engine/io/rerank_template.hpp"

#include "engine/base/error.hpp"

namespace cbatch {

// Qwen3-Reranker's model card: the system turn states the task, the user turn holds instruction, query
// and document, and the assistant turn starts after an empty thinking block, where "yes" or "no" follows.
const std::vector<RerankTemplate>& rerank_templates() {
  static const std::vector<RerankTemplate> rows = {
      {"qwen3",
       "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
       "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
       "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"
       "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
       "Given a web search query, retrieve relevant passages that answer the query", "yes", "no"},
  };
  return rows;
}

const RerankTemplate* find_rerank_template(std::string_view name) {
  for (const RerankTemplate& row : rerank_templates()) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

// One pass over the template: text put in a placeholder is never read as a placeholder itself.
std::string RerankFormat::render(std::string_view query, std::string_view document) const {
  const std::string_view t = row->prompt;
  std::string out;
  size_t i = 0;
  while (i < t.size()) {
    if (t[i] == '{') {
      bool replaced = false;
      for (const auto& [key, value] : {std::pair{std::string_view("{instruction}"), row->instruction},
                                       std::pair{std::string_view("{query}"), query},
                                       std::pair{std::string_view("{document}"), document}}) {
        if (t.substr(i, key.size()) == key) {
          out += value;
          i += key.size();
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out += t[i++];
  }
  return out;
}

RerankFormat resolve_rerank_format(const RerankTemplate& row, const Tokenizer& tokenizer) {
  RerankFormat format;
  format.row = &row;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string text = tokenizer.token_text(id);
    if (text == row.yes_token && format.yes_no_ids[0] < 0) format.yes_no_ids[0] = id;
    if (text == row.no_token && format.yes_no_ids[1] < 0) format.yes_no_ids[1] = id;
  }
  for (int k = 0; k < 2; ++k) {
    if (format.yes_no_ids[k] < 0) {
      throw Error("--reranker " + std::string(row.name) + ": the model's vocabulary has no token \"" +
                  std::string(k == 0 ? row.yes_token : row.no_token) + "\", its answer token");
    }
  }
  return format;
}

}  // namespace cbatch
