// The sentence-transformers files of a model directory: modules.json (Transformer, then Pooling with its
// folder's config.json, then optionally Normalize), sentence_bert_config.json (max_seq_length), and
// config.json's Matryoshka flag (is_matryoshka or matryoshka_dimensions). A module cbatch cannot apply
// (Dense, max pooling, ...) throws cbatch::Error naming the file and the module.
#pragma once
#include <string>

#include "engine/model/model.hpp"

namespace cbatch {

// Nothing (has_pooling false) for a directory without modules.json.
EmbeddingSpec read_sentence_transformers(const std::string& dir);

}  // namespace cbatch
