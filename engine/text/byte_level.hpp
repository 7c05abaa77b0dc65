// GPT-2's byte-level alphabet: every byte maps to one printable code point (printable Latin-1 bytes to
// themselves, the other 68 to U+0100..U+0143 in byte order), so BPE vocabularies of byte-level
// tokenizers ("Ġ" for a space) are text. Used to encode pre-tokenized pieces and decode token texts.
#pragma once
#include <string>
#include <string_view>

namespace cbatch {

// Each byte of `bytes` as its code point, UTF-8 encoded.
std::string byte_level_encode(std::string_view bytes);

// The bytes a byte-level token text stands for; false when a character is outside the alphabet.
bool byte_level_decode(std::string_view text, std::string* bytes);

}  // namespace cbatch
