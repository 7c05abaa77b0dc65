// Appending a sampled token to a sequence and deciding whether it stops there: EOS or a stop token id
// (finish "stop", token kept in the ids, not in the text), a stop string (text cut before it), or
// max_tokens / the model's context (finish "length").
#pragma once
#include <cstdint>

#include "engine/core/sequence.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

void append_token(Sequence& seq, int32_t token, const Tokenizer& tokenizer);

}  // namespace cbatch
