// NFC: compositions, Hangul arithmetic, canonical reordering of marks, composition exclusions and
// singletons, blocking, invalid bytes passed through; the tables' sizes as the generator wrote them.
#include <doctest/doctest.h>

#include "engine/text/nfc.hpp"

namespace cbatch {

TEST_CASE("NFC normalizes as Unicode's canonical composition") {
  using unicode::to_nfc;
  CHECK(to_nfc("plain ascii") == "plain ascii");
  CHECK(to_nfc("e\xCC\x81") == "\xC3\xA9");                   // e + U+0301 -> é
  CHECK(to_nfc("\xC3\xA9") == "\xC3\xA9");                    // already composed
  CHECK(to_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") == "\xEA\xB0\x81");  // jamo G A K -> 각 (U+AC01)
  CHECK(to_nfc("\xEA\xB0\x80\xE1\x86\xA8") == "\xEA\xB0\x81");  // 가 + final K -> 각
  // a + acute (230) + ogonek (202): the ogonek sorts first and composes, the acute follows.
  CHECK(to_nfc("a\xCC\x81\xCC\xA8") == "\xC4\x85\xCC\x81");
  CHECK(to_nfc("\xE2\x84\xAB") == "\xC3\x85");              // ANGSTROM SIGN (singleton) -> Å
  CHECK(to_nfc("\xE0\xA5\x98") == "\xE0\xA4\x95\xE0\xA4\xBC");  // U+0958 is excluded: stays decomposed
  CHECK(to_nfc("a\xCC\xA3\xCC\xA3\xCC\x81") == "\xE1\xBA\xA1\xCC\xA3\xCC\x81");  // second dot below blocks nothing above
  CHECK(to_nfc("e\xFF\xCC\x81") == "e\xFF\xCC\x81");        // an invalid byte passes and blocks
  CHECK(unicode::combining_class(0x301) == 230);
  CHECK(unicode::combining_class('a') == 0);
  CHECK(unicode::kNumCompositions > 900);
  CHECK(unicode::kNumDecompositions > 2000);
}

}  // namespace cbatch
