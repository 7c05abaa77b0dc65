// The BPE merge step of Hugging Face's BPE model, shared by byte-level (GPT-2 style) and
// SentencePiece-style (byte fallback) tokenizers: a word's characters become symbols, then the
// adjacent pair with the lowest merge rank (ties: leftmost) merges until no ranked pair is left.
// Merges are (left, right) token texts in rank order; both parts and their concatenation must be in
// the vocabulary.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cbatch {

struct BpeModelOptions {
  bool byte_fallback = false;  // a character without a token becomes its <0xNN> byte tokens
  bool ignore_merges = false;  // a word that is a token as a whole is that token (Llama 3)
  bool fuse_unk = false;       // consecutive unknown characters give one unk
  int32_t unk_id = -1;         // -1: unknown characters are dropped
};

class BpeModel {
 public:
  // Throws cbatch::Error naming `source` and the merge when a merge refers to unknown tokens.
  BpeModel(const std::vector<std::string>& tokens, const std::vector<std::pair<std::string, std::string>>& merges,
           const BpeModelOptions& options, const std::string& source);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t find(std::string_view text) const;  // -1 when not a token

 private:
  struct Symbol;
  std::vector<Symbol> initial_symbols(std::string_view word) const;

  BpeModelOptions options_;
  struct TextHash {  // lets find() look up a string_view without building a std::string
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> ids_;  // token text -> id
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left, right) -> (rank, merged)
  std::array<int32_t, 256> byte_ids_{};                               // byte -> <0xNN> token, or -1
};

// A merges entry "left right" split at its first space after the first byte; false if it has none.
bool split_merge(std::string_view merge, std::pair<std::string, std::string>* out);

}  // namespace cbatch
