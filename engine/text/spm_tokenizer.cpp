// SentencePiece BPE encoding and piece decoding. The merge loop follows SentencePiece's bpe_model.cc
// (and llama.cpp's llm_tokenizer_spm): symbols form a linked list over the escaped text, candidate
// pairs sit in a max-heap keyed by (piece score, -left position), and a popped pair is stale when
// either side has changed since it was queued.
#include "engine/text/spm_tokenizer.hpp"

#include <cmath>
#include <queue>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

struct Symbol {
  int prev = -1;
  int next = -1;
  size_t begin = 0;  // byte offset into the escaped text
  size_t size = 0;   // bytes; 0 once merged into the symbol on its left
};

struct Pair {
  float score = 0.0f;
  int left = 0;
  int right = 0;
  size_t size = 0;  // bytes of the merged piece when queued
};

struct PairOrder {  // std::priority_queue pops the largest: highest score, then leftmost
  bool operator()(const Pair& a, const Pair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

size_t utf8_char_size(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;  // a stray continuation or invalid byte stands alone (and falls back to its byte token)
}

std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out += kSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_spaces(std::string_view piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpace.size()) == kSpace) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

WhitespaceStrip strip_of(const SpmVocab& vocab, int32_t id) {
  for (const auto& [token, strip] : vocab.strips) {
    if (token == id) return strip;
  }
  return {};
}

}  // namespace

bool parse_byte_piece(std::string_view piece, uint8_t* byte) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return false;
  const int hi = hex_digit(piece[3]);
  const int lo = hex_digit(piece[4]);
  if (hi < 0 || lo < 0) return false;
  *byte = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

SpmTokenizer::SpmTokenizer(SpmVocab vocab, const std::string& source) : vocab_(std::move(vocab)) {
  const size_t n = vocab_.pieces.size();
  if (n == 0) throw Error("'" + source + "': the tokenizer has no tokens");
  if (vocab_.scores.size() != n || vocab_.types.size() != n) {
    throw Error("'" + source + "': tokenizer has " + std::to_string(n) + " tokens but " +
                std::to_string(vocab_.scores.size()) + " scores and " + std::to_string(vocab_.types.size()) +
                " token types");
  }
  for (int32_t id : {vocab_.unk_id, vocab_.bos_id, vocab_.eos_id}) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      throw Error("'" + source + "': special token id " + std::to_string(id) +
                  " is outside the vocabulary (" + std::to_string(n) + " tokens)");
    }
  }
  for (size_t id = 0; id < n; ++id) {
    if (std::isnan(vocab_.scores[id])) {
      throw Error("'" + source + "': token " + std::to_string(id) + " has a NaN score");
    }
  }
  byte_ids_.fill(vocab_.unk_id);
  decoded_.resize(n);
  piece_ids_.reserve(n);
  std::vector<SpecialTokenMatcher::Token> specials;
  for (size_t id = 0; id < n; ++id) {
    const std::string& piece = vocab_.pieces[id];
    const TokenType type = vocab_.types[id];
    uint8_t byte = 0;
    if (type == TokenType::kByte && parse_byte_piece(piece, &byte)) {
      byte_ids_[byte] = static_cast<int32_t>(id);
      decoded_[id] = std::string(1, static_cast<char>(byte));
    } else if (type == TokenType::kNormal || type == TokenType::kUserDefined || type == TokenType::kUnused) {
      piece_ids_.emplace(piece, static_cast<int32_t>(id));  // the first of duplicate pieces wins
      decoded_[id] = unescape_spaces(piece);
    }  // control and unknown tokens decode to ""
    if (type == TokenType::kControl || type == TokenType::kUserDefined || type == TokenType::kUnknown) {
      specials.push_back({piece, static_cast<int32_t>(id), strip_of(vocab_, static_cast<int32_t>(id))});
    }
  }
  specials_.add_all(std::move(specials));
  bos_id_ = vocab_.bos_id;
  eos_ids_ = {vocab_.eos_id};
  for (int32_t id : vocab_.extra_eos_ids) {
    if (id >= 0 && static_cast<size_t>(id) < n && !is_eos(id)) eos_ids_.push_back(id);
  }
}

int32_t SpmTokenizer::find_piece(std::string_view piece) const {
  auto it = piece_ids_.find(std::string(piece));
  return it == piece_ids_.end() ? -1 : it->second;
}

void SpmTokenizer::append_bytes(std::string_view text, std::vector<int32_t>& out) const {
  for (char c : text) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
}

void SpmTokenizer::encode_text(const std::string& text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  for (size_t begin = 0; begin < text.size();) {
    const size_t size = std::min(utf8_char_size(static_cast<uint8_t>(text[begin])), text.size() - begin);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, -1, begin, size});
    if (index > 0) symbols[index - 1].next = index;
    begin += size;
  }
  std::priority_queue<Pair, std::vector<Pair>, PairOrder> queue;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].size + symbols[right].size;
    const int32_t id = find_piece(std::string_view(text).substr(symbols[left].begin, size));
    if (id >= 0) queue.push({vocab_.scores[id], left, right, size});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const Pair pair = queue.top();
    queue.pop();
    Symbol& left = symbols[pair.left];
    Symbol& right = symbols[pair.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;  // stale
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    try_pair(left.prev, pair.left);
    try_pair(pair.left, left.next);
  }
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = std::string_view(text).substr(symbols[i].begin, symbols[i].size);
    const int32_t id = find_piece(piece);
    if (id >= 0) {
      out.push_back(id);
    } else {
      append_bytes(piece, out);
    }
  }
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special && vocab_.add_bos) ids.push_back(vocab_.bos_id);
  for (const TextFragment& fragment : specials_.split(text)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      continue;
    }
    const bool is_first = fragment.text.data() == text.data();
    const bool starts_with_space = fragment.text[0] == ' ' || fragment.text.substr(0, kSpace.size()) == kSpace;
    const bool prefix = vocab_.add_space_prefix && (!vocab_.space_prefix_first_only || (is_first && !starts_with_space));
    const std::string escaped = (prefix ? std::string(kSpace) : std::string()) + escape_spaces(fragment.text);
    encode_text(escaped, ids);
  }
  if (add_special && vocab_.add_eos) ids.push_back(vocab_.eos_id);
  return ids;
}

std::string SpmTokenizer::decode_piece(int32_t prev, int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                std::to_string(vocab_size() - 1) + ")");
  }
  const std::string& piece = decoded_[id];
  // SentencePiece drops the dummy-prefix space of the first piece; a byte token keeps its byte. Without
  // a dummy prefix (Gemma) a leading space is the text's own.
  if (vocab_.add_space_prefix && prev == vocab_.bos_id && !piece.empty() && piece[0] == ' ' &&
      vocab_.types[id] != TokenType::kByte) {
    return piece.substr(1);
  }
  return piece;
}

}  // namespace cbatch
