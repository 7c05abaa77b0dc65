#include "engine/io/json_number_locator.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/base/elide.hpp"

namespace cbatch {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// JSON's number grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
bool is_json_number(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t begin = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    return i > begin;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// A well-formed number simdjson reads: an integer within int64 (negative) or uint64, else a finite double.
bool is_readable(const std::string& s) {
  const bool is_integer = s.find_first_of(".eE") == std::string::npos;
  errno = 0;
  char* end = nullptr;
  if (is_integer && s[0] == '-') {
    (void)std::strtoll(s.c_str(), &end, 10);
  } else if (is_integer) {
    (void)std::strtoull(s.c_str(), &end, 10);
  } else {
    const double d = std::strtod(s.c_str(), &end);
    return std::isfinite(d);  // an underflow to 0 or a subnormal reads fine
  }
  return errno != ERANGE;
}

// One open object or list: the path of its parent, and its current key or index.
struct Frame {
  bool is_object;
  std::string key;
  int64_t index = -1;
};

std::string path_of(const std::vector<Frame>& stack) {
  std::string path;
  for (const Frame& f : stack) {
    if (f.is_object) {
      path += (path.empty() ? "" : ".") + f.key;
    } else {
      path += "[" + std::to_string(f.index) + "]";
    }
  }
  return path;
}

// The string starting at json[i] == '"' (raw, escapes kept); i moves past its closing quote.
std::optional<std::string_view> scan_string(std::string_view json, size_t& i) {
  const size_t begin = ++i;
  while (i < json.size() && json[i] != '"') i += json[i] == '\\' ? 2 : 1;
  if (i >= json.size()) return std::nullopt;
  return json.substr(begin, i++ - begin);
}

}  // namespace

std::optional<BadNumber> find_bad_number(std::string_view json) {
  std::vector<Frame> stack;
  bool expect_key = false;  // inside an object, before a key
  for (size_t i = 0; i < json.size();) {
    const char c = json[i];
    if (c == '"') {
      const auto s = scan_string(json, i);
      if (!s) return std::nullopt;
      if (expect_key && !stack.empty()) stack.back().key = std::string(*s);
      expect_key = false;
    } else if (c == '{' || c == '[') {
      stack.push_back({c == '{', "", c == '[' ? 0 : -1});
      expect_key = c == '{';
      ++i;
    } else if (c == '}' || c == ']') {
      if (stack.empty()) return std::nullopt;
      stack.pop_back();
      ++i;
    } else if (c == ',') {
      if (stack.empty()) return std::nullopt;
      if (stack.back().is_object) expect_key = true; else ++stack.back().index;
      ++i;
    } else if (c == '-' || is_digit(c)) {
      const size_t begin = i;
      while (i < json.size() && (is_digit(json[i]) || std::string_view("+-.eE").find(json[i]) != std::string_view::npos)) ++i;
      const std::string text(json.substr(begin, i - begin));
      if (!is_json_number(text)) return BadNumber{path_of(stack), text, true};
      if (!is_readable(text)) return BadNumber{path_of(stack), text, false};
    } else {
      ++i;  // ':', whitespace, the letters of true, false and null
    }
  }
  return std::nullopt;
}

std::string describe_bad_number(const BadNumber& bad) {
  const std::string where = bad.field.empty() ? "the line" : "field '" + elide(bad.field, 80) + "'";
  if (bad.is_syntax) return where + " holds " + elide(bad.text, 40) + ", which is not a JSON number";
  return where + " holds the number " + elide(bad.text, 40) +
         ", which is out of range: integers must lie in [-2^63, 2^64 - 1], other numbers within +-1.8e308";
}

}  // namespace cbatch
