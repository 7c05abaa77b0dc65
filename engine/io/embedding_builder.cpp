#include "engine/io/embedding_builder.hpp"

#include <algorithm>

namespace cbatch {
namespace {

// ids (with the special tokens) cut to `limit` tokens: the text's own tokens are dropped from its end.
std::vector<int32_t> truncate_text(const Tokenizer& tokenizer, const std::string& text, std::vector<int32_t> ids,
                                   int limit) {
  const std::vector<int32_t> plain = tokenizer.encode(text, /*add_special=*/false);
  const size_t num_special = ids.size() - plain.size();  // the post-processor's, before and after the text
  size_t prefix = 0;
  while (prefix < num_special && !std::equal(plain.begin(), plain.end(), ids.begin() + static_cast<std::ptrdiff_t>(prefix))) {
    ++prefix;
  }
  const size_t suffix = num_special - prefix;
  const size_t keep = static_cast<size_t>(std::max<int64_t>(0, int64_t{limit} - int64_t(prefix + suffix)));
  std::vector<int32_t> out(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prefix));
  out.insert(out.end(), plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(std::min(keep, plain.size())));
  out.insert(out.end(), ids.end() - static_cast<std::ptrdiff_t>(suffix), ids.end());
  return out;
}

}  // namespace

std::variant<std::vector<int32_t>, std::string> embedding_prompt(const RequestInput& input, const Model& model,
                                                                 EmbeddingParams& params) {
  if (!model.config.is_encoder()) {
    return "'input' asks for an embedding, but the model (" + model.config.architecture +
           ") is a generation model; embedding lines need an embedding model (an encoder such as BERT)";
  }
  const EmbeddingInput& e = *input.embedding;
  const EmbeddingSpec& spec = model.embedding;
  if (!e.pooling && !spec.has_pooling) {
    return "the model has no pooling information (no sentence-transformers modules.json with a Pooling module); "
           "give --pooling mean, cls or last";
  }
  params.pooling = e.pooling ? *e.pooling : spec.pooling;
  params.normalize = spec.normalize;
  params.base64 = e.base64;
  if (e.dimensions > 0) {
    if (!spec.matryoshka) return "dimensions: the model does not support Matryoshka truncation (no is_matryoshka in config.json)";
    if (e.dimensions > model.config.dim) {
      return "dimensions " + std::to_string(e.dimensions) + " exceeds the model's embedding size " + std::to_string(model.config.dim);
    }
    params.dimensions = e.dimensions;
  }
  const int context = model.config.max_context;
  int limit = e.truncate_prompt_tokens > 0 ? e.truncate_prompt_tokens : spec.max_seq_length > 0 ? spec.max_seq_length : context;
  if (limit > context) {
    return "truncate_prompt_tokens " + std::to_string(limit) + " exceeds the model's context of " + std::to_string(context) + " tokens";
  }
  std::vector<int32_t> ids;
  if (input.prompt) {
    ids = model.tokenizer->encode(*input.prompt, /*add_special=*/true);
    if (static_cast<int>(ids.size()) > limit) {
      const size_t before = ids.size();
      ids = truncate_text(*model.tokenizer, *input.prompt, std::move(ids), limit);
      params.truncated_tokens = static_cast<int>(before - ids.size());
    }
  } else {
    ids = *input.prompt_token_ids;
    for (int32_t id : ids) {
      if (id < 0 || id >= model.config.vocab_size) {
        return "input contains token id " + std::to_string(id) + ", outside the vocabulary [0, " +
               std::to_string(model.config.vocab_size) + ")";
      }
    }
    if (static_cast<int>(ids.size()) > limit) {
      params.truncated_tokens = static_cast<int>(ids.size()) - limit;
      ids.resize(static_cast<size_t>(limit));
    }
  }
  if (ids.empty()) return "the input has no tokens";
  return ids;
}

}  // namespace cbatch
