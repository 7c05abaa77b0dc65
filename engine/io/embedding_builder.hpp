// An embedding line as a Request: the model must compute embeddings (an encoder) and know its pooling (or
// the run gives --pooling); the text is tokenized with the special tokens and truncated to
// truncate_prompt_tokens, else the model's max_seq_length, else its context, as sentence-transformers does:
// the text's tokens are cut, the special tokens around them kept ([CLS] ... [SEP]). Token id inputs are
// cut to their first tokens. The dropped counts go into EmbeddingParams::truncated_tokens. `dimensions` is
// refused unless the model says it is Matryoshka-trained.
#pragma once
#include <string>
#include <variant>

#include "engine/base/request.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// Fills params and the ids of each input (in order); returns the error message for the line ("" if none).
std::string embedding_inputs(const RequestInput& input, const Model& model, EmbeddingParams& params,
                             std::vector<std::vector<int32_t>>& inputs);

}  // namespace cbatch
