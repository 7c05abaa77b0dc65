// GBNF text -> Grammar, by recursive descent straight into the NFA builder. Rule names get ids at their
// first mention (definitions may come later); a name never defined is an error at its first use.
#include <algorithm>
#include <map>

#include "engine/constrain/grammar.hpp"
#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : t_(text) {}

  Grammar run() {
    try {
      parse_rules();
    } catch (const Error& e) {
      if (std::string_view(e.what()).substr(0, 8) == "grammar:") throw;
      fail(e.what());  // the builder's size bound, with the position
    }
    for (size_t r = 0; r < g_.rules.size(); ++r) {
      if (!defined_[r]) fail_at(first_use_[r], "undefined rule '" + elide(g_.names[r]) + "'");
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw Error("grammar: no 'root' rule");
    g_.root = root->second;
    g_.nfa = b_.take(g_.rules[static_cast<size_t>(g_.root)]);
    check_grammar(g_);
    return std::move(g_);
  }

 private:
  static constexpr int kMaxDepth = 200;
  static constexpr int64_t kMaxCount = 1000;            // the largest repetition count
  static constexpr int64_t kSaturated = 1000000000000;  // counts read past this stay at it

  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    const size_t line_start = t_.rfind('\n', pos == 0 ? 0 : pos - 1);
    const auto line = std::count(t_.begin(), t_.begin() + static_cast<std::ptrdiff_t>(std::min(pos, t_.size())), '\n') + 1;
    const size_t column = pos - (line_start == std::string_view::npos || pos == 0 ? 0 : line_start + 1) + 1;
    throw Error("grammar: " + what + " at line " + std::to_string(line) + " column " + std::to_string(column));
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  bool at_end() const { return pos_ >= t_.size(); }
  char peek() const { return t_[pos_]; }
  static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  std::string name() {
    const size_t begin = pos_;
    while (!at_end() && is_word(peek())) ++pos_;
    if (pos_ == begin) fail("expected a rule name");
    return std::string(t_.substr(begin, pos_ - begin));
  }

  int32_t rule_id(const std::string& n, size_t use) {
    const auto [it, added] = ids_.emplace(n, static_cast<int32_t>(g_.rules.size()));
    if (added) {
      if (g_.rules.size() >= kMaxRules) fail_at(use, "more than " + std::to_string(kMaxRules) + " rules");
      g_.rules.push_back({-1, -1});
      g_.names.push_back(n);
      defined_.push_back(false);
      first_use_.push_back(use);
    }
    return it->second;
  }

  void parse_rules() {
    skip_space(true);
    while (!at_end()) {
      const size_t at = pos_;
      const int32_t id = rule_id(name(), at);
      if (defined_[static_cast<size_t>(id)]) fail_at(at, "rule '" + elide(g_.names[static_cast<size_t>(id)]) + "' defined twice");
      skip_space(false);
      if (t_.substr(pos_, 3) != "::=") fail("expected '::='");
      pos_ += 3;
      skip_space(true);
      g_.rules[static_cast<size_t>(id)] = alternates(false);
      defined_[static_cast<size_t>(id)] = true;
      skip_space(false);
      if (!at_end() && peek() != '\n' && peek() != '\r') fail("unexpected character");
      skip_space(true);
    }
  }

  // Alternatives; outside parentheses a body ends at a newline unless the next line goes on with '|'.
  Fragment alternates(bool nested) {
    std::vector<Fragment> options{sequence(nested)};
    for (;;) {
      const size_t before = pos_;
      skip_space(true);
      if (at_end() || peek() != '|') {
        pos_ = before;
        break;
      }
      ++pos_;
      skip_space(true);
      options.push_back(sequence(nested));
    }
    return b_.alternatives(options);
  }

  Fragment sequence(bool nested) {
    Fragment f = b_.empty();
    for (;;) {
      skip_space(nested);
      if (at_end() || peek() == '|' || peek() == ')' || peek() == '\n' || peek() == '\r') return f;
      const int32_t first_state = b_.size();
      Fragment e = element();
      postfix(e, first_state);
      b_.append(f, e);
    }
  }

  Fragment element() {
    const char c = peek();
    if (c == '"') return literal();
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      return b_.code_points({{0, 0x10FFFF}});
    }
    if (c == '(') {
      if (++depth_ > kMaxDepth) fail("groups nested over " + std::to_string(kMaxDepth) + " deep");
      ++pos_;
      skip_space(true);
      const Fragment f = alternates(true);
      skip_space(true);
      if (at_end() || peek() != ')') fail("missing ')'");
      ++pos_;
      --depth_;
      return f;
    }
    if (is_word(c)) {
      const size_t at = pos_;
      return b_.call(rule_id(name(), at));
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  void postfix(Fragment& e, int32_t first_state) {
    while (!at_end()) {
      int lo = 0, hi = -1;
      const char c = peek();
      if (c == '*') lo = 0, hi = -1, ++pos_;
      else if (c == '+') lo = 1, hi = -1, ++pos_;
      else if (c == '?') lo = 0, hi = 1, ++pos_;
      else if (c == '{') counted(lo, hi);
      else return;
      e = b_.repeat(e, first_state, lo, hi);
    }
  }

  void counted(int& lo, int& hi) {
    ++pos_;
    skip_space(false);
    lo = number();
    hi = lo;
    skip_space(false);
    if (!at_end() && peek() == ',') {
      ++pos_;
      skip_space(false);
      hi = !at_end() && peek() >= '0' && peek() <= '9' ? number() : -1;
      skip_space(false);
    }
    if (at_end() || peek() != '}') fail("expected '}'");
    ++pos_;
    if (hi != -1 && hi < lo) fail("a repetition {m,n} with n < m");
  }

  // Every digit, the value saturating, then the limit (so {1000000} is refused, never cut short).
  int number() {
    const size_t begin = pos_;
    int64_t v = 0;
    for (; !at_end() && peek() >= '0' && peek() <= '9'; ++pos_) v = std::min<int64_t>(v * 10 + (peek() - '0'), kSaturated);
    if (pos_ == begin) fail("expected a number");
    if (v > kMaxCount) {
      const std::string digits(t_.substr(begin, pos_ - begin));
      pos_ = begin;
      fail("a repetition count above " + std::to_string(kMaxCount) + " (" + elide(digits, 40) + ")");
    }
    return static_cast<int>(v);
  }

  // One character of a literal or class (after an escape or as UTF-8), as a code point.
  uint32_t character() {
    if (at_end()) fail("unexpected end of the grammar");
    const auto lead = static_cast<unsigned char>(peek());
    if (lead == '\\') return escape();
    const int len = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > t_.size()) fail("invalid UTF-8");
    uint32_t c = len == 1 ? lead : lead & (0x3F >> (len - 1));
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(t_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
      c = (c << 6) | (b & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return c;
  }

  uint32_t escape() {
    ++pos_;
    if (at_end()) fail("a trailing backslash");
    const char c = t_[pos_++];
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '/': case '^': return static_cast<uint32_t>(c);
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default: --pos_; fail(std::string("unknown escape \\") + c);
    }
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char h = at_end() ? 0 : peek();
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) fail("a bad hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > 0x10FFFF) fail("a code point above U+10FFFF");
    return v;
  }

  Fragment literal() {
    ++pos_;
    std::string bytes;
    while (!at_end() && peek() != '"') {
      const size_t at = pos_;
      const uint32_t c = character();
      if (c >= 0xD800 && c <= 0xDFFF) fail_at(at, "a surrogate (U+D800..U+DFFF) in a literal: no UTF-8 text holds one");
      bytes += utf8_encode(c);
    }
    if (at_end()) fail("an unterminated string literal");
    ++pos_;
    return b_.bytes(bytes);
  }

  Fragment char_class() {
    ++pos_;
    const bool negate = !at_end() && peek() == '^';
    if (negate) ++pos_;
    NfaBuilder::CodePointRanges ranges;
    while (!at_end() && peek() != ']') {
      const uint32_t lo = character();
      uint32_t hi = lo;
      if (pos_ + 1 < t_.size() && peek() == '-' && t_[pos_ + 1] != ']') {
        ++pos_;
        hi = character();
        if (hi < lo) fail("a bad character range");
      }
      ranges.emplace_back(lo, hi);
    }
    if (at_end()) fail("missing ']'");
    ++pos_;
    return b_.code_points(negate ? complement(ranges) : ranges);
  }

  static NfaBuilder::CodePointRanges complement(NfaBuilder::CodePointRanges ranges) {
    std::sort(ranges.begin(), ranges.end());
    NfaBuilder::CodePointRanges out;
    uint32_t next = 0;
    for (const auto& [lo, hi] : ranges) {
      if (lo > next) out.emplace_back(next, lo - 1);
      next = std::max(next, hi + 1);
    }
    if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
    return out;
  }

  std::string_view t_;
  size_t pos_ = 0;
  int depth_ = 0;
  NfaBuilder b_;
  Grammar g_;
  std::map<std::string, int32_t> ids_;
  std::vector<bool> defined_;      // (rule)
  std::vector<size_t> first_use_;  // (rule) offset of its first mention
};

}  // namespace

Grammar compile_gbnf(std::string_view text) { return GbnfParser(text).run(); }

}  // namespace cbatch
