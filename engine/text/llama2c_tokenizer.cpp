// A llama2.c tokenizer.bin as a SentencePiece tokenizer. Its pieces hold plain spaces (restored to
// U+2581 here), ids 0, 1, 2 are <unk>, <s>, </s> (stored as "<unk>", "\n<s>\n", "\n</s>\n"), and
// <0xNN> pieces are the byte-fallback tokens. The file does not store its token count: the model's
// vocab_size says how many entries to read, and the file must end right after them.
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/base/mapped_file.hpp"
#include "engine/text/spm_tokenizer.hpp"
#include "engine/text/tokenizer_loaders.hpp"

namespace cbatch {
namespace {

std::string restore_spaces(const std::string& piece) {
  std::string out;
  for (char c : piece) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out += c;
    }
  }
  return out;
}

void add_token(SpmVocab& vocab, std::string piece, float score) {
  const int32_t id = static_cast<int32_t>(vocab.pieces.size());
  uint8_t byte = 0;
  TokenType type = TokenType::kNormal;
  if (id == 0) {
    type = TokenType::kUnknown;
    piece = "<unk>";
  } else if (id == 1 || id == 2) {
    type = TokenType::kControl;
    piece = id == 1 ? "<s>" : "</s>";
  } else if (parse_byte_piece(piece, &byte)) {
    type = TokenType::kByte;
  } else {
    piece = restore_spaces(piece);
  }
  vocab.pieces.push_back(std::move(piece));
  vocab.scores.push_back(score);
  vocab.types.push_back(type);
}

}  // namespace

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int vocab_size) {
  const MappedFile file(path);
  const uint8_t* data = file.data();
  const size_t size = file.size();
  auto fail = [&](const std::string& what) -> void {
    throw Error("'" + path + "': not a valid llama2.c tokenizer.bin: " + what);
  };
  if (size < 4) fail("shorter than its 4-byte header");
  size_t pos = 4;  // int32 max_token_length, not needed
  SpmVocab vocab;
  while (vocab_size > 0 ? static_cast<int>(vocab.pieces.size()) < vocab_size : pos < size) {
    const std::string where = "token " + std::to_string(vocab.pieces.size());
    if (size - pos < 8)
      fail(where + " is truncated (the model expects " + std::to_string(vocab_size) + " tokens)");
    float score;
    int32_t length;
    std::memcpy(&score, data + pos, 4);
    std::memcpy(&length, data + pos + 4, 4);
    pos += 8;
    if (length < 0 || static_cast<size_t>(length) > size - pos)
      fail(where + " has a bad length " + std::to_string(length));
    add_token(vocab, std::string(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(length)),
              score);
    pos += static_cast<size_t>(length);
  }
  if (pos != size) {
    fail(std::to_string(size - pos) + " bytes follow the " + std::to_string(vocab_size) +
         " tokens the model expects (is it the tokenizer of another model?)");
  }
  if (vocab.pieces.size() < 3) fail("fewer than 3 tokens");
  return std::make_unique<SpmTokenizer>(std::move(vocab), path);
}

}  // namespace cbatch
