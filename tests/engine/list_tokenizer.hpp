// A vocabulary given as a list of byte strings, for the constraint tests (token t decodes to pieces[t]).
#pragma once
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

}  // namespace cbatch
