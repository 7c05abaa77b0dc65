// IdSet: membership and first lines across growth, distinct ids that share prefixes or lengths, and
// ids whose bytes differ only in the tail (the hash's partial last word).
#include <doctest/doctest.h>

#include <string>

#include "engine/io/id_set.hpp"

TEST_CASE("id set: insert keeps the first line, contains and line_of agree across growth") {
  cbatch::IdSet ids;
  CHECK_FALSE(ids.contains("\"a\""));
  CHECK(ids.line_of("\"a\"") == -1);
  for (int i = 0; i < 100000; ++i) REQUIRE(ids.insert("\"q" + std::to_string(i) + "\"", i + 1));
  CHECK(ids.size() == 100000);
  for (int i = 0; i < 100000; i += 997) {
    CHECK(ids.contains("\"q" + std::to_string(i) + "\""));
    CHECK(ids.line_of("\"q" + std::to_string(i) + "\"") == i + 1);
  }
  CHECK_FALSE(ids.insert("\"q5\"", 999999));
  CHECK(ids.line_of("\"q5\"") == 6);
  CHECK_FALSE(ids.contains("\"q100000\""));
  CHECK_FALSE(ids.contains("q5"));  // a string id and its unquoted text differ
  CHECK(ids.size() == 100000);
}

TEST_CASE("id set: ids differing in one byte, in length or by a zero byte are distinct") {
  cbatch::IdSet ids;
  const std::string base = "0123456789abcdef0123";  // a full word, then a partial one
  CHECK(ids.insert(base, 1));
  for (size_t i = 0; i < base.size(); ++i) {
    std::string changed = base;
    changed[i] ^= 1;
    CHECK(ids.insert(changed, 2));
  }
  CHECK(ids.insert(base.substr(0, 19), 3));
  CHECK(ids.insert(base + std::string(1, '\0'), 4));
  CHECK(ids.insert("", 5));
  CHECK_FALSE(ids.insert("", 6));
  CHECK(ids.size() == base.size() + 4);
}
