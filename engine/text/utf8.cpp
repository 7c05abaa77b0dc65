// UTF-8 sequence decoding by the table of well-formed byte sequences (Unicode 3.9, table 3-7).
#include "engine/text/utf8.hpp"

namespace cbatch {
namespace {

// Number of bytes a sequence with this lead byte has, or 0 for a byte that cannot start one.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The allowed range of the second byte narrows for some lead bytes (no overlongs, no surrogates,
// nothing above U+10FFFF); every other continuation byte is 0x80..0xBF.
bool is_valid_second(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

}  // namespace

Utf8Sequence next_utf8_sequence(std::string_view s, size_t pos) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  const size_t want = sequence_length(lead);
  if (want == 0) return {1, false};
  size_t have = 1;
  while (have < want && pos + have < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos + have]);
    const bool ok = have == 1 ? is_valid_second(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++have;
  }
  return {have, have == want};
}

bool is_valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Sequence seq = next_utf8_sequence(s, pos);
    if (!seq.is_valid) return false;
    pos += seq.length;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Sequence seq = next_utf8_sequence(s, pos);
    if (seq.is_valid) {
      out.append(s.substr(pos, seq.length));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    pos += seq.length;
  }
  return out;
}

}  // namespace cbatch
