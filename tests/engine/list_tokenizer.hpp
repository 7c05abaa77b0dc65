// A vocabulary given as a list of byte strings, for the constraint tests (token t decodes to pieces[t]).
#pragma once
#include <random>
#include <string>
#include <vector>

#include "engine/text/tokenizer.hpp"

namespace cbatch {

class ListTokenizer final : public Tokenizer {
 public:
  explicit ListTokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode_piece(int32_t, int32_t id) const override { return pieces_[static_cast<size_t>(id)]; }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string_view kind() const override { return "byte"; }

 private:
  std::vector<std::string> pieces_;
};

// `count` random pieces of 1 to 4 bytes of `alphabet` (é's two bytes may be cut apart), then one empty
// piece: a control token, which a constraint never allows.
inline std::vector<std::string> random_pieces(std::mt19937& rng, const std::string& alphabet, int count) {
  std::vector<std::string> pieces;
  for (int i = 0; i < count; ++i) {
    std::string p;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < len; ++j) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(p);
  }
  pieces.emplace_back();
  return pieces;
}

}  // namespace cbatch
