// The tokenizer of a GGUF file, from its tokenizer.ggml.* metadata: tokens, scores, token types,
// special token ids and the add_bos / add_eos / add_space_prefix flags (llama.cpp's defaults when
// absent). Only the "llama" (SentencePiece BPE) model is supported so far.
#include "engine/error.hpp"
#include "engine/spm_tokenizer.hpp"
#include "engine/tokenizer_loaders.hpp"

namespace cbatch {
namespace {

// Types when the file has no tokenizer.ggml.token_type: <0xNN> pieces are bytes, specials control.
TokenType guess_type(const SpmVocab& vocab, size_t id) {
  uint8_t byte = 0;
  if (parse_byte_piece(vocab.pieces[id], &byte)) return TokenType::kByte;
  if (static_cast<int32_t>(id) == vocab.unk_id) return TokenType::kUnknown;
  if (static_cast<int32_t>(id) == vocab.bos_id || static_cast<int32_t>(id) == vocab.eos_id) {
    return TokenType::kControl;
  }
  return TokenType::kNormal;
}

void read_scores_and_types(const GgufFile& gguf, SpmVocab& vocab) {
  const size_t n = vocab.pieces.size();
  if (gguf.find("tokenizer.ggml.scores")) {
    const std::vector<double>& scores = gguf.get_floats("tokenizer.ggml.scores");
    vocab.scores.assign(scores.begin(), scores.end());
  } else {
    vocab.scores.assign(n, 0.0f);
  }
  if (gguf.find("tokenizer.ggml.token_type")) {
    for (int64_t type : gguf.get_ints("tokenizer.ggml.token_type")) {
      if (type < 1 || type > 6) {
        throw Error("'" + gguf.path() + "': tokenizer.ggml.token_type holds unknown type " +
                    std::to_string(type));
      }
      vocab.types.push_back(static_cast<TokenType>(type));
    }
  } else {
    for (size_t id = 0; id < n; ++id) vocab.types.push_back(guess_type(vocab, id));
  }
}

int32_t token_id(const GgufFile& gguf, const char* key, int64_t fallback) {
  const int64_t id = gguf.get_int(key, fallback);
  if (id < 0 || id > INT32_MAX) {
    throw Error("'" + gguf.path() + "': " + key + " = " + std::to_string(id) + " is not a token id");
  }
  return static_cast<int32_t>(id);
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& gguf) {
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  if (model != "llama") {
    throw Error("'" + gguf.path() + "': tokenizer.ggml.model '" + model +
                "' is not supported yet (supported: llama)");
  }
  SpmVocab vocab;
  vocab.pieces = gguf.get_strings("tokenizer.ggml.tokens");
  vocab.unk_id = token_id(gguf, "tokenizer.ggml.unknown_token_id", 0);
  vocab.bos_id = token_id(gguf, "tokenizer.ggml.bos_token_id", 1);
  vocab.eos_id = token_id(gguf, "tokenizer.ggml.eos_token_id", 2);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (gguf.find(key)) vocab.extra_eos_ids.push_back(token_id(gguf, key, 0));
  }
  vocab.add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token", true);
  vocab.add_eos = gguf.get_bool("tokenizer.ggml.add_eos_token", false);
  vocab.add_space_prefix = gguf.get_bool("tokenizer.ggml.add_space_prefix", true);
  read_scores_and_types(gguf, vocab);
  return std::make_unique<SpmTokenizer>(std::move(vocab), gguf.path());
}

}  // namespace cbatch
