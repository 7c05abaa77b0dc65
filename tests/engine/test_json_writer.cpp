// JsonWriter and the UTF-8 repair it relies on: separators, RFC 8259 escaping checked by parsing the
// output back with simdjson, U+FFFD for each maximal invalid subpart, and number formatting.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "engine/io/json_writer.hpp"
#include "engine/text/utf8.hpp"

using cbatch::JsonWriter;
using cbatch::json_quote;

namespace {

// Parses `json` (one JSON string value) and returns the decoded string; fails the test if invalid.
std::string parse_string_back(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  std::string_view s;
  const auto err = parser.parse(padded).get_string().get(s);
  REQUIRE_MESSAGE(err == simdjson::SUCCESS, json);
  return std::string(s);
}

std::string number_text(double v, int decimals = JsonWriter::kShortest) {
  JsonWriter w;
  w.number(v, decimals);
  return w.str();
}

const std::string kFffd = "\xEF\xBF\xBD";

}  // namespace

TEST_CASE("json writer: separators and nesting") {
  JsonWriter w;
  w.begin_object();
  w.key("a").int64(1);
  w.key("b").begin_array().int64(1).uint64(2).end_array();
  w.key("c").begin_object().end_object();
  w.key("d").null();
  w.key("e").boolean(true);
  w.key("f").raw("\"q1\"");
  w.key("g").begin_array().begin_object().key("x").boolean(false).end_object().begin_array().end_array()
      .end_array();
  w.end_object();
  CHECK(w.str() ==
        R"({"a": 1, "b": [1, 2], "c": {}, "d": null, "e": true, "f": "q1", "g": [{"x": false}, []]})");
}

TEST_CASE("json writer: integer extremes and int arrays") {
  JsonWriter w;
  const int32_t ids[] = {0, -5, 2147483647};
  w.begin_array()
      .int64(std::numeric_limits<int64_t>::min())
      .uint64(std::numeric_limits<uint64_t>::max())
      .int_array(ids)
      .end_array();
  CHECK(w.str() == "[-9223372036854775808, 18446744073709551615, [0, -5, 2147483647]]");
}

TEST_CASE("json writer: escapes quotes, backslashes and control characters") {
  CHECK(json_quote("a\"b\\c/d") == R"("a\"b\\c/d")");
  CHECK(json_quote("\n\t\r\b\f") == R"("\n\t\r\b\f")");
  CHECK(json_quote(std::string("\x01\x1f\x7f", 3)) == "\"\\u0001\\u001f\x7f\"");
  CHECK(json_quote(std::string("a\0b", 3)) == R"("a\u0000b")");
}

TEST_CASE("json writer: every ASCII byte and multi-byte characters survive a round trip") {
  std::string s;
  for (int c = 0; c < 128; ++c) s += static_cast<char>(c);
  s += "é中😀\xE2\x80\xA8";  // 2, 3 and 4 byte characters and U+2028
  CHECK(parse_string_back(json_quote(s)) == s);
}

TEST_CASE("json writer: invalid UTF-8 becomes one U+FFFD per maximal subpart") {
  struct Case {
    std::string in;
    std::string out;
  };
  const Case cases[] = {
      {"ab\xE2\x82", "ab" + kFffd},                       // a euro sign cut after 2 of 3 bytes
      {"\xF0\x9F\x98", kFffd},                             // an emoji cut after 3 of 4 bytes
      {"x\xFFy", "x" + kFffd + "y"},                       // a byte that never starts a sequence
      {"\xC0\xAF", kFffd + kFffd},                         // overlong '/'
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},             // a UTF-16 surrogate
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // above U+10FFFF
      {"\x80\x80", kFffd + kFffd},                         // lone continuation bytes
      {"\xE2\x82\xAC\xE2", "\xE2\x82\xAC" + kFffd},        // a whole euro, then a cut one
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    const std::string json = json_quote(c.in);
    CHECK(parse_string_back(json) == c.out);
    CHECK(cbatch::repair_utf8(c.in) == c.out);
    CHECK_FALSE(cbatch::is_valid_utf8(c.in));
  }
  CHECK(cbatch::is_valid_utf8("é中😀"));
}

TEST_CASE("json writer: numbers") {
  CHECK(number_text(12.5, 3) == "12.5");
  CHECK(number_text(12.0, 3) == "12.0");
  CHECK(number_text(310.2345, 3) == "310.235");  // rounded to the asked decimals
  CHECK(number_text(0.0004, 3) == "0.0");
  CHECK(number_text(7, 0) == "7.0");
  CHECK(number_text(0.1) == "0.1");
  CHECK(number_text(5) == "5.0");
  CHECK(number_text(1e21) == "1e+21");
  CHECK(number_text(1.5e-7) == "1.5e-07");
  CHECK(number_text(std::nan("")) == "null");
  CHECK(number_text(INFINITY) == "null");
  CHECK(number_text(-INFINITY, 3) == "null");
  const double third = 1.0 / 3.0;
  CHECK(std::stod(number_text(third)) == third);  // shortest form still round-trips
}

TEST_CASE("json writer: a NaN inside an object keeps the separators right") {
  JsonWriter w;
  w.begin_object().key("a").number(NAN).key("b").number(1.25, 2).end_object();
  CHECK(w.str() == R"({"a": null, "b": 1.25})");
}
