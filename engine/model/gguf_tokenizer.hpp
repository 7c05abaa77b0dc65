// The tokenizer a GGUF file carries in its tokenizer.ggml.* metadata (gguf_tokenizer.cpp), built from
// text/'s tokenizers. Throws cbatch::Error naming the file and the problem.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/gguf.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

// tokenizer.ggml.model "llama" (SentencePiece BPE) or "gpt2" (byte-level BPE).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& gguf);

// Control or user-defined tokens that end generation by their text, as llama.cpp recognizes them
// ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", ...).
std::vector<int32_t> end_of_generation_ids(const std::vector<std::string>& tokens, const std::vector<TokenType>& types);

}  // namespace cbatch
