// Counted constructs in the constraint compilers: a count over its limit is an error naming the limit
// (and, in a schema, the keyword), never a clamp or a literal; the regex forms mean what Python's `re`
// says ({,n} is 0..n, `x{}` and `x{ 1}` are literal text) or are refused (a repeated repeat, possessive
// forms, `{1}` with nothing before it), as tests/e2e/test_regex_reference.py checks at random.
#include <doctest/doctest.h>

#include <string>

#include "engine/base/error.hpp"
#include "engine/constrain/grammar.hpp"
#include "engine/constrain/json_schema.hpp"
#include "engine/constrain/token_automaton.hpp"
#include "regex_match.hpp"

namespace cbatch {
namespace {

using test::full_match;

template <typename F>
std::string error_of(F&& compile) {
  try {
    compile();
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string regex_error(const std::string& pattern) { return error_of([&] { compile_regex(pattern); }); }
std::string gbnf_error(const std::string& text) { return error_of([&] { compile_gbnf(text); }); }
std::string schema_error(const std::string& schema) {
  return error_of([&] { check_constraint(json_schema_constraint(schema)); });
}

}  // namespace

TEST_CASE("regex: a repetition count over 1000 is an error naming the limit, however many digits") {
  for (const char* bad : {"a{1001}", "a{100000}", "a{1000000}", "a{99999999999999999999}", "a{1,1000000}",
                          "a{1000000,}", "a{,1000000}", "a{4294967295}", "(ab){0,18446744073709551616}"}) {
    const std::string input = bad;
    CAPTURE(input);
    CHECK_MESSAGE(regex_error(bad).find("a repetition count above 1000") != std::string::npos, regex_error(bad));
  }
  CHECK(full_match("a{1000}", std::string(1000, 'a')));
  CHECK_FALSE(full_match("a{1000}", std::string(999, 'a')));
  CHECK_MESSAGE(regex_error("a{3,2}").find("n < m") != std::string::npos, regex_error("a{3,2}"));
}

TEST_CASE("regex: {,n} is 0..n repetitions and {,} any number, as in Python") {
  CHECK(full_match("a{,3}", ""));
  CHECK(full_match("a{,3}", "aaa"));
  CHECK_FALSE(full_match("a{,3}", "aaaa"));
  CHECK_FALSE(full_match("a{,3}", "a{,3}"));
  CHECK(full_match("(?:ab){,2}c", "ababc"));
  CHECK(full_match("a{,0}b", "b"));
  CHECK(full_match("a{,}", ""));
  CHECK(full_match("a{,}", "aaaaaaa"));
  CHECK_FALSE(full_match("a{,}", "a{,}"));
}

TEST_CASE("regex: a '{' that starts no count is a literal") {
  for (const char* pattern : {"x{}", "x{a}", "x{ 1}", "x{1 }", "x{1,2", "x{1,2,3}", "x{-1}", "{", "}", "a{{1}"}) {
    const std::string input = pattern;
    CAPTURE(input);
    std::string text = pattern;
    if (text == "a{{1}") text = "a{";
    CHECK(full_match(pattern, text));
  }
  CHECK(full_match("x{+1}", "x{{{1}"));  // '+' repeats the literal '{'
  CHECK(full_match("a{01}", "a"));
}

TEST_CASE("regex: repeats Python refuses are refused") {
  for (const char* bad : {"a**", "a{2}{3}", "a*??", "a+*", "a?{2}", "a{1,2}?{3}", "a*?+"}) {
    const std::string input = bad;
    CAPTURE(input);
    CHECK_MESSAGE(regex_error(bad).find("multiple repeat") != std::string::npos, regex_error(bad));
  }
  for (const char* bad : {"{1}", "{,}", "{2,3}x", "a|{1}", "({1})", "^*", "^{2}", "^+"}) {
    const std::string input = bad;
    CAPTURE(input);
    CHECK_MESSAGE(regex_error(bad).find("nothing to repeat") != std::string::npos, regex_error(bad));
  }
  for (const char* bad : {"a*+", "a++", "a?+", "a{2}+", "a{1,}+"}) {
    const std::string input = bad;
    CAPTURE(input);
    CHECK_MESSAGE(regex_error(bad).find("possessive") != std::string::npos, regex_error(bad));
  }
  CHECK(full_match("a{2,3}?", "aaa"));  // lazy: the same language
  CHECK(full_match("(?:a*)*", "aaa"));
}

TEST_CASE("regex: escapes and ranges as Python reads them") {
  CHECK_MESSAGE(regex_error("[\\d-a]").find("range") != std::string::npos, regex_error("[\\d-a]"));
  CHECK(full_match("[\\d-]", "-"));
  CHECK(full_match("\\é+", "éé"));  // an escaped non-ASCII character is the whole character
  CHECK_MESSAGE(regex_error("\\ud800").find("surrogate") != std::string::npos, regex_error("\\ud800"));
}

TEST_CASE("GBNF: a repetition count over 1000 is an error naming the limit") {
  for (const char* bad : {"root ::= \"a\"{1001}", "root ::= \"a\"{1000000}", "root ::= \"a\"{99999999999999999999}",
                          "root ::= \"a\"{1,1000000}", "root ::= \"a\"{1000000,}"}) {
    const std::string input = bad;
    CAPTURE(input);
    CHECK_MESSAGE(gbnf_error(bad).find("a repetition count above 1000") != std::string::npos, gbnf_error(bad));
  }
  CHECK_MESSAGE(gbnf_error("root ::= \"a\"{,3}").find("expected a number") != std::string::npos, gbnf_error("root ::= \"a\"{,3}"));
  CHECK_MESSAGE(gbnf_error("root ::= \"\\ud800\"").find("surrogate") != std::string::npos, gbnf_error("root ::= \"\\ud800\""));
  CHECK_MESSAGE(gbnf_error("root ::= [\\U00110000]").find("U+10FFFF") != std::string::npos, gbnf_error("root ::= [\\U00110000]"));
}

TEST_CASE("regex rules: a call of a rule past the last one names the count") {
  const std::string error = error_of([] { compile_regex_rules({"a(?&99999999999999999999)", "b"}); });
  CAPTURE(error);
  CHECK(error.find("2 rules") != std::string::npos);
  CHECK(error_of([] { compile_regex_rules({"a(?&1)", "b"}); }) == "(accepted)");
}

TEST_CASE("JSON schema: a count over its limit, or not a count, is an error naming the keyword") {
  struct Case {
    const char* schema;
    const char* expect;
  };
  const Case cases[] = {
      {R"({"type": "string", "maxLength": 1000000})", "'maxLength' 1000000 is above the limit 1000"},
      {R"({"type": "string", "minLength": 1001})", "'minLength' 1001 is above the limit 1000"},
      {R"({"type": "string", "maxLength": 18446744073709551615})", "'maxLength' 18446744073709551615 is above the limit 1000"},
      {R"({"type": "string", "maxLength": 1e30})", "is above the limit 1000"},
      {R"({"type": "string", "maxLength": 3.5})", "'maxLength' must be a non-negative integer"},
      {R"({"type": "string", "maxLength": "5"})", "'maxLength' must be a non-negative integer"},
      {R"({"type": "string", "minLength": -1})", "'minLength' must be a non-negative integer"},
      {R"({"type": "string", "minLength": 5, "maxLength": 3})", "'maxLength' 3 is below 'minLength' 5"},
      {R"({"type": "array", "maxItems": 1000000})", "'maxItems' 1000000 is above the limit 100"},
      {R"({"type": "array", "minItems": 101})", "'minItems' 101 is above the limit 100"},
      {R"({"type": "array", "minItems": 1e300})", "is above the limit 100"},
      {R"({"type": "array", "maxItems": null})", "'maxItems' must be a non-negative integer"},
      {R"({"type": "string", "pattern": "a{1000000}"})", "a repetition count above 1000"},
      {R"({"type": "integer", "minimum": 1e20})", "'minimum' leaves no integer of at most 16 digits"},
      {R"({"type": "integer", "exclusiveMaximum": -1e17})", "'exclusiveMaximum' leaves no integer of at most 16 digits"},
      {R"({"type": "array", "prefixItems": [{}, {}, {}], "maxItems": 1})", "'maxItems' 1 is below the 3 'prefixItems'"},
      {R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})", "'minItems' 2 is above the 1 'prefixItems'"},
      {R"({"type": "string", "pattern": "a{2}", "maxLength": 5})", "'pattern' together with 'minLength'/'maxLength'"},
  };
  for (const Case& c : cases) {
    const std::string schema = c.schema, error = schema_error(c.schema);
    CAPTURE(schema);
    CAPTURE(error);
    CHECK(error.find(c.expect) != std::string::npos);
  }
  CHECK(schema_error(R"({"type": "string", "maxLength": 1000})") == "(accepted)");
  CHECK(schema_error(R"({"type": "string", "maxLength": 3.0})") == "(accepted)");  // an integral number is a count
  CHECK(schema_error(R"({"type": "array", "maxItems": 100})") == "(accepted)");
  CHECK(schema_error(R"({"type": "string", "pattern": "a\\$"})") == "(accepted)");  // an escaped '$' stays
}

}  // namespace cbatch
