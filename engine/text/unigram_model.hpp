// A SentencePiece Unigram model as Hugging Face `tokenizers` runs it: the best segmentation of a word by
// Viterbi over the pieces' log-probability scores. Where no piece of exactly one character starts at a
// position, an unknown node of that one character competes with score min(scores) - 10; ties keep the
// first path found (the earliest start). Runs of unknown characters fuse into one unknown token
// (fuse_unk, the default); with byte_fallback an unknown span becomes its bytes' <0xXX> pieces when the
// vocabulary has them all. Scores are doubles, as `tokenizers` keeps them.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cbatch {

struct UnigramModelSpec {
  std::vector<std::string> pieces;  // (vocab) the model's pieces by id ("▁the", "<unk>", "<0x41>")
  std::vector<double> scores;       // (vocab) their log probabilities
  int32_t unk_id = -1;              // -1: none (an unknown character is then an error)
  bool byte_fallback = false;
  bool fuse_unk = true;
};

class UnigramModel {
 public:
  explicit UnigramModel(UnigramModelSpec spec);
  UnigramModel(const UnigramModel&) = delete;  // ids_ views the pieces
  UnigramModel& operator=(const UnigramModel&) = delete;

  // Appends the ids of word's best segmentation to out; throws cbatch::Error when word has a character
  // no piece covers and the model has no unknown token.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  int32_t find(std::string_view piece) const;
  void append_piece(std::string_view piece, int32_t id, std::vector<int32_t>& out) const;

  UnigramModelSpec spec_;
  std::unordered_map<std::string_view, int32_t> ids_;  // piece -> id (views into spec_.pieces)
  size_t max_piece_bytes_ = 0;
  double unk_score_ = 0.0;
};

}  // namespace cbatch
