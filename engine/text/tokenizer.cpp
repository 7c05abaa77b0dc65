// Shared parts of every tokenizer.
#include "engine/text/tokenizer.hpp"

#include <algorithm>

#include "engine/base/error.hpp"

namespace cbatch {

bool Tokenizer::is_eos(int32_t id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

EncodedPair Tokenizer::encode_pair(std::string_view, std::string_view) const {
  throw Error("the " + std::string(kind()) +
              " tokenizer has no pair template: text pairs need a cross-encoder's tokenizer");
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, int32_t prev) const {
  std::string text;
  for (int32_t id : ids) {
    text += decode_piece(prev, id);
    prev = id;
  }
  return text;
}

}  // namespace cbatch
