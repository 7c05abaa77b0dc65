// Factories of the concrete tokenizers, one per source: a llama2.c tokenizer.bin and the byte tokenizer
// of dummy models (a GGUF file's tokenizer: model/gguf_tokenizer.hpp). Each throws cbatch::Error naming
// the file and the problem.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/text/tokenizer.hpp"

namespace cbatch {

// A llama2.c tokenizer.bin: int32 max_token_length, then per token float score, int32 length, bytes.
// Exactly vocab_size tokens must follow (vocab_size <= 0: as many as the file holds).
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int vocab_size);

// Dummy models: ids 0..255 are raw bytes; BOS/EOS decode to "" (they win over a colliding byte id).
// bos_id < 0 means vocab_size - 2, empty eos_ids means {vocab_size - 1}.
std::unique_ptr<Tokenizer> make_byte_tokenizer(int vocab_size, int32_t bos_id, std::vector<int32_t> eos_ids);

}  // namespace cbatch
