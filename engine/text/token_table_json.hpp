// What tokenizer.json's BPE (hf_tokenizer_json.cpp), WordPiece (wordpiece_json.cpp) and Unigram
// (unigram_json.cpp) readers share. The token table: model.vocab ({text: id}, normal tokens) and added_tokens (special ->
// control, else user-defined), stored by id in two parallel vectors that grow to the largest id; ids are
// below 2^22, ids never named stay kUnused with empty text. Malformed entries throw cbatch::Error naming
// the file and the field.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/base/json_file.hpp"
#include "engine/text/bpe_tokenizer.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

// tokens (vocab) texts, types (vocab): the model's "vocab" object.
void read_json_vocab(const JsonFields& model, std::vector<std::string>& tokens, std::vector<TokenType>& types);

// The root's "added_tokens" list, when present. Each token, once stored, goes to `each` (when set) with its
// fields, for what only one reader takes (the BPE reader's lstrip / rstrip).
void read_json_added_tokens(const JsonFields& root, std::vector<std::string>& tokens, std::vector<TokenType>& types,
                            const std::function<void(const JsonFields& token, int32_t id)>& each = {});

// A Metaspace pre-tokenizer's settings: replacement "▁" (anything else is refused), where the "▁" prefix
// goes (prepend_scheme, or the older add_prefix_space), and whether words split before each "▁".
struct MetaspaceSpec {
  SpacePrefix space_prefix = SpacePrefix::kAlways;
  bool split = true;
};
MetaspaceSpec read_metaspace(const JsonFields& p);

}  // namespace cbatch
