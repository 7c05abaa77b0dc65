#include "engine/io/embedding_builder.hpp"

#include <algorithm>

namespace cbatch {
namespace {

// ids (with the special tokens) cut to `limit` tokens, the special tokens counted and kept (as a Hugging
// Face tokenizer's max_length counts them): the text's own tokens are dropped from its end. The error
// message when the limit leaves none of them.
std::variant<std::vector<int32_t>, std::string> truncate_text(const Tokenizer& tokenizer, const std::string& text,
                                                              std::vector<int32_t> ids, int limit) {
  const std::vector<int32_t> plain = tokenizer.encode(text, /*add_special=*/false);
  const size_t num_special = ids.size() - plain.size();  // the post-processor's, before and after the text
  size_t prefix = 0;
  while (prefix < num_special && !std::equal(plain.begin(), plain.end(), ids.begin() + static_cast<std::ptrdiff_t>(prefix))) {
    ++prefix;
  }
  const size_t suffix = num_special - prefix;
  if (int64_t{limit} <= static_cast<int64_t>(num_special)) {
    return "truncate_prompt_tokens " + std::to_string(limit) + " keeps none of the text: it counts the " +
           std::to_string(num_special) + " special tokens the model adds, so it must be at least " +
           std::to_string(num_special + 1);
  }
  const size_t keep = static_cast<size_t>(limit) - num_special;
  std::vector<int32_t> out(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prefix));
  out.insert(out.end(), plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(std::min(keep, plain.size())));
  out.insert(out.end(), ids.end() - static_cast<std::ptrdiff_t>(suffix), ids.end());
  return out;
}

}  // namespace

namespace {

// The options the model allows, or the error message.
std::string resolve_params(const EmbeddingInput& e, const Model& model, EmbeddingParams& params) {
  if (!model.config.is_encoder() && !e.decoder_allowed) {
    return "'input' asks for an embedding, but the model (" + model.config.architecture +
           ") is a generation model; embedding lines need an embedding model (an encoder such as BERT) or --task embed";
  }
  if (model.config.is_cross_encoder()) {
    return "the model is a cross-encoder (a sequence-classification head): it scores text pairs (/v1/score, "
           "/v1/rerank), it does not embed";
  }
  const EmbeddingSpec& spec = model.embedding;
  if (!e.pooling && !spec.has_pooling) {
    return "the model has no pooling information (no sentence-transformers modules.json with a Pooling module); "
           "give --pooling mean, cls or last";
  }
  params.pooling = e.pooling ? *e.pooling : spec.pooling;
  params.normalize = spec.normalize;
  params.base64 = e.base64;
  if (e.dimensions > 0) {
    if (!spec.matryoshka) {
      return "dimensions " + std::to_string(e.dimensions) +
             ": the model does not support Matryoshka truncation (config.json has no is_matryoshka or matryoshka_dimensions)";
    }
    if (e.dimensions > model.config.dim) {
      return "dimensions " + std::to_string(e.dimensions) + " exceeds the model's embedding size " + std::to_string(model.config.dim);
    }
    params.dimensions = e.dimensions;
  }
  return "";
}

// One input's ids (truncated to limit; *dropped counts what was cut), or the error message.
std::variant<std::vector<int32_t>, std::string> input_ids(const Model& model, const std::string* text,
                                                          const std::vector<int32_t>* ids_in, int limit, int* dropped) {
  std::vector<int32_t> ids;
  if (text != nullptr) {
    ids = model.tokenizer->encode(*text, /*add_special=*/true);
    const size_t before = ids.size();
    if (static_cast<int>(ids.size()) > limit) {
      auto cut = truncate_text(*model.tokenizer, *text, std::move(ids), limit);
      if (auto* message = std::get_if<std::string>(&cut)) return *message;
      ids = std::move(std::get<std::vector<int32_t>>(cut));
    }
    *dropped = static_cast<int>(before - ids.size());
  } else {
    ids = *ids_in;
    for (int32_t id : ids) {
      if (id < 0 || id >= model.config.vocab_size) {
        return "input contains token id " + std::to_string(id) + ", outside the vocabulary [0, " +
               std::to_string(model.config.vocab_size) + ")";
      }
    }
    *dropped = std::max(0, static_cast<int>(ids.size()) - limit);
    if (*dropped > 0) ids.resize(static_cast<size_t>(limit));
  }
  if (ids.empty()) return std::string("the input has no tokens");
  return ids;
}

}  // namespace

std::string embedding_inputs(const RequestInput& input, const Model& model, EmbeddingParams& params,
                             std::vector<std::vector<int32_t>>& inputs) {
  const EmbeddingInput& e = *input.embedding;
  if (std::string why = resolve_params(e, model, params); !why.empty()) return why;
  const int context = model.config.max_context;
  const int max_seq = model.embedding.max_seq_length;
  const int limit = e.truncate_prompt_tokens > 0 ? e.truncate_prompt_tokens : max_seq > 0 ? std::min(max_seq, context) : context;
  if (limit > context) {
    return "truncate_prompt_tokens " + std::to_string(limit) + " exceeds the model's context of " + std::to_string(context) + " tokens";
  }
  const size_t n = e.texts.size() + e.token_ids.size();
  for (size_t i = 0; i < n; ++i) {
    int dropped = 0;
    auto ids = i < e.texts.size() ? input_ids(model, &e.texts[i], nullptr, limit, &dropped)
                                  : input_ids(model, nullptr, &e.token_ids[i - e.texts.size()], limit, &dropped);
    if (auto* message = std::get_if<std::string>(&ids)) {
      return n > 1 ? embedding_input_field(input.form, params, n, i) + ": " + *message : *message;
    }
    inputs.push_back(std::move(std::get<std::vector<int32_t>>(ids)));
    params.truncated_tokens.push_back(dropped);
  }
  return "";
}

}  // namespace cbatch
