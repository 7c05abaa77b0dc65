// The tokenizer of a Hugging Face model directory: tokenizer.json (a BPE model, byte-level or
// SentencePiece-style, with the normalizer, pre-tokenizer and post-processor it declares; WordPiece and
// Unigram models have their own readers),
// completed by tokenizer_config.json (bos/eos tokens, add_bos_token / add_eos_token, chat_template),
// generation_config.json and config.json (eos ids). Unsupported components and malformed fields
// throw cbatch::Error naming the file and the field.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/text/bpe_tokenizer.hpp"

namespace cbatch {

// What tokenizer.json alone says.
struct HfTokenizerJson {
  BpeTokenizerSpec spec;            // bos/eos ids and add_bos/add_eos not yet set
  std::string template_bos;         // the special token the post-processor puts first ("" if none)
  std::string template_eos;         // ... and last
};

HfTokenizerJson read_tokenizer_json(const std::string& path);

// config.json's bos/eos ids (-1 / empty if none) are the fallback and extra eos ids; *chat_template
// receives the template text ("" if none).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir, int32_t config_bos_id,
                                             const std::vector<int32_t>& config_eos_ids, std::string* chat_template);

}  // namespace cbatch
