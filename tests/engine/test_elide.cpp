// elide: short text untouched, long text cut at the bound on a UTF-8 character boundary and followed
// by its full length, and invalid UTF-8 still cut near the bound.
#include <doctest/doctest.h>

#include <string>

#include "engine/base/elide.hpp"

using cbatch::elide;

TEST_CASE("elide: text within the bound is returned unchanged") {
  CHECK(elide("") == "");
  CHECK(elide("abc") == "abc");
  const std::string exact(cbatch::kQuoteBytes, 'x');
  CHECK(elide(exact) == exact);
  CHECK(elide("abcd", 4) == "abcd");
}

TEST_CASE("elide: long text keeps its first max_bytes bytes and says its full length") {
  const std::string text = std::string(cbatch::kQuoteBytes, 'a') + std::string(999'800, 'b');
  CHECK(elide(text) == std::string(cbatch::kQuoteBytes, 'a') + "... (1000000 bytes)");
  CHECK(elide("abcdef", 4) == "abcd... (6 bytes)");
  CHECK(elide("abcdef", 0) == "... (6 bytes)");
}

TEST_CASE("elide: the cut never splits a UTF-8 character") {
  // "é" is 2 bytes, "€" 3, "😀" 4: a bound inside one of them cuts before it.
  CHECK(elide("ab\xC3\xA9xyz", 3) == "ab... (7 bytes)");
  CHECK(elide("ab\xC3\xA9xyz", 4) == "ab\xC3\xA9... (7 bytes)");
  CHECK(elide("a\xE2\x82\xAC" "b", 2) == "a... (5 bytes)");
  CHECK(elide("a\xE2\x82\xAC" "b", 3) == "a... (5 bytes)");
  CHECK(elide("a\xF0\x9F\x98\x80" "b", 4) == "a... (6 bytes)");
  CHECK(elide("a\xF0\x9F\x98\x80" "b", 5) == "a\xF0\x9F\x98\x80... (6 bytes)");
  std::string euros;
  for (int i = 0; i < 1000; ++i) euros += "\xE2\x82\xAC";
  const std::string cut = elide(euros);
  CHECK(cut == euros.substr(0, 198) + "... (3000 bytes)");  // 66 whole characters of 3 bytes
}

TEST_CASE("elide: a run of continuation bytes (not UTF-8) is cut at the bound, not at its start") {
  const std::string junk = "a" + std::string(500, '\x80');
  CHECK(elide(junk, 100) == junk.substr(0, 100) + "... (501 bytes)");
}
