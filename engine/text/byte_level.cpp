// The byte <-> code point tables of GPT-2's bytes_to_unicode(), built once.
#include "engine/text/byte_level.hpp"

#include <array>
#include <cstdint>
#include <unordered_map>

#include "engine/text/unicode.hpp"

namespace cbatch {
namespace {

struct ByteLevelTables {
  std::array<std::string, 256> encoded;             // byte -> UTF-8 of its code point
  std::unordered_map<uint32_t, uint8_t> decoded;    // code point -> byte
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t = [] {
    ByteLevelTables tables;
    uint32_t next_extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : next_extra++;
      tables.encoded[b] = unicode::encode_utf8(cp);
      tables.decoded[cp] = static_cast<uint8_t>(b);
    }
    return tables;
  }();
  return t;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  const ByteLevelTables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.encoded[static_cast<uint8_t>(c)];
  return out;
}

bool byte_level_decode(std::string_view text, std::string* bytes) {
  const ByteLevelTables& t = tables();
  const unicode::Codepoints cps = unicode::decode_utf8(text);
  bytes->clear();
  for (uint32_t cp : cps.cps) {
    auto it = t.decoded.find(cp);
    if (it == t.decoded.end()) return false;
    bytes->push_back(static_cast<char>(it->second));
  }
  return true;
}

}  // namespace cbatch
