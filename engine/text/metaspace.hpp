// SentencePiece's spaces as the Metaspace pre-tokenizer writes them (U+2581 "▁" for a space, an optional
// "▁" prefix) and its split into words, shared by the BPE and Unigram tokenizers of tokenizer.json files.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace cbatch {

// SentencePiece's word-boundary marker, U+2581 "▁", which stands for a space in token texts.
inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";

// text with every occurrence of `from` (non-empty; empty: text unchanged) replaced by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

enum class SpacePrefix : uint8_t {
  kNone,    // no "▁" before the text
  kFirst,   // before the text's first fragment only (Metaspace prepend_scheme "first")
  kAlways,  // before every fragment between special tokens (Prepend normalizer, llama.cpp's SPM)
};

// Calls each(word) for the words of escaped text: with `split` each runs up to the next "▁" (the marker
// starts the next word, as Metaspace's split does), else the whole text is one word.
template <typename Each>
void for_each_metaspace_word(std::string_view escaped, bool split, Each&& each) {
  if (!split) return each(escaped);
  size_t begin = 0;
  for (size_t at; (at = escaped.find(kSpaceMarker, begin + 1)) != std::string_view::npos; begin = at) {
    each(escaped.substr(begin, at - begin));
  }
  each(escaped.substr(begin));
}

}  // namespace cbatch
