#include "engine/base/elide.hpp"

namespace cbatch {
namespace {

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string elide(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // A UTF-8 character has at most 3 continuation bytes: backing up further would mean the text is
  // not UTF-8 there, and then any cut is as good as another.
  size_t cut = max_bytes;
  for (int back = 0; back < 3 && cut > 0 && is_continuation_byte(text[cut]); ++back) --cut;
  if (is_continuation_byte(text[cut])) cut = max_bytes;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace cbatch
