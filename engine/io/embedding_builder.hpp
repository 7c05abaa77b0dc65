// An embedding line as a Request: the model must compute embeddings (an encoder) and know its pooling (or
// the run gives --pooling); the text is tokenized with the special tokens and truncated to
// truncate_prompt_tokens, else the model's max_seq_length, else its context, as sentence-transformers does:
// the text's tokens are cut, the special tokens around them kept ([CLS] ... [SEP]). Token id inputs are
// cut to their first tokens. The dropped count goes into EmbeddingParams::truncated_tokens.
#pragma once
#include <string>
#include <variant>

#include "engine/base/request.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// The request's prompt ids and EmbeddingParams, or the error message for its line.
std::variant<std::vector<int32_t>, std::string> embedding_prompt(const RequestInput& input, const Model& model,
                                                                 EmbeddingParams& params);

}  // namespace cbatch
