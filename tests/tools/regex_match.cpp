// Test tool: full matches of regexes as the engine compiles a `structured_outputs.regex`
// (compile_regex_dfa: the pattern's NFA, its whole byte DFA under kMaxDfaStates), for
// tests/e2e/test_regex_reference.py to compare with Python's `re`. No model: the DFA is queried directly.
// Reads JSON lines {"pattern": "...", "strings": ["...", ...]} on stdin; writes one line each:
//   {"accepted": true, "matches": [true, false, ...]}   (a string's UTF-8 bytes fully match)
//   {"accepted": false, "error": "..."}                 (the cbatch::Error the engine would report)
// A line that is not such an object is a usage error: exit 1 naming its number.
#include <simdjson.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/constrain/token_automaton.hpp"
#include "engine/io/json_writer.hpp"

namespace {

bool full_match(cbatch::ByteDfa& dfa, std::string_view text) {
  int32_t s = dfa.start();
  for (unsigned char c : text) {
    s = dfa.next(s, c);
    if (s == cbatch::ByteDfa::kDead) return false;
  }
  return dfa.accepting(s);
}

std::string answer(std::string_view pattern, const std::vector<std::string_view>& strings) {
  cbatch::JsonWriter out;
  out.begin_object();
  std::unique_ptr<cbatch::ByteDfa> dfa;
  try {
    dfa = cbatch::compile_regex_dfa(pattern);
  } catch (const cbatch::Error& e) {
    out.key("accepted").boolean(false).key("error").string(e.what()).end_object();
    return out.take();
  }
  out.key("accepted").boolean(true).key("matches").begin_array();
  for (std::string_view s : strings) out.boolean(full_match(*dfa, s));
  out.end_array().end_object();
  return out.take();
}

}  // namespace

int main() {
  simdjson::dom::parser parser;
  std::string line;
  for (long number = 1; std::getline(std::cin, line); ++number) {
    simdjson::dom::object obj;
    std::string_view pattern;
    simdjson::dom::array list;
    if (parser.parse(line).get(obj) != simdjson::SUCCESS || obj["pattern"].get(pattern) != simdjson::SUCCESS ||
        obj["strings"].get(list) != simdjson::SUCCESS) {
      std::fprintf(stderr, "regex_match: line %ld is not {\"pattern\": STRING, \"strings\": [STRING, ...]}\n", number);
      return 1;
    }
    std::vector<std::string_view> strings;
    for (simdjson::dom::element e : list) {
      std::string_view s;
      if (e.get(s) != simdjson::SUCCESS) {
        std::fprintf(stderr, "regex_match: line %ld: \"strings\" holds a value that is not a string\n", number);
        return 1;
      }
      strings.push_back(s);
    }
    std::cout << answer(pattern, strings) << '\n';
  }
  return 0;
}
