// Recursive descent over the pattern, building Thompson fragments (start, end) in one growing NFA.
#include "engine/constrain/regex_nfa.hpp"

#include <algorithm>
#include <cctype>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

using ByteSet = NfaBuilder::AsciiSet;  // an ASCII class; non-ASCII characters are handled by `with_multibyte`

class Parser {
 public:
  // num_rules > 0: (?&N) calls rule N < num_rules (grammar.hpp); 0: calls are refused.
  Parser(std::string_view p, NfaBuilder& b, int num_rules) : p_(p), b_(b), num_rules_(num_rules) {}

  Fragment run() {
    try {
      const Fragment f = alternation();
      if (pos_ != p_.size()) fail(p_[pos_] == ')' ? "unbalanced ')'" : "unexpected character");
      return f;
    } catch (const Error& e) {
      if (std::string_view(e.what()).substr(0, 14) == "invalid regex ") throw;
      fail(e.what());  // the builder's size bound, with the pattern and offset
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("invalid regex '" + elide(p_) + "': " + what + " at offset " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  Fragment alternation() {
    std::vector<Fragment> options{sequence()};
    while (!at_end() && peek() == '|') {
      ++pos_;
      options.push_back(sequence());
    }
    return b_.alternatives(options);
  }

  Fragment sequence() {
    Fragment f = b_.empty();
    while (!at_end() && peek() != '|' && peek() != ')') b_.append(f, repeated());
    return f;
  }

  // An atom and at most one quantifier, read as Python's `re` does: a lazy '?' after it changes nothing
  // here (a full match does not care); a possessive '+' and a second quantifier are refused.
  Fragment repeated() {
    const int32_t first_state = b_.size();
    const Fragment atom_f = atom();
    Count c;
    if (!quantifier(c)) return atom_f;
    if (!at_end() && peek() == '?') ++pos_;
    else if (!at_end() && peek() == '+') fail("possessive quantifiers (a*+, a{2}+) are not supported");
    if (starts_quantifier(pos_)) fail("multiple repeat (a quantifier after a quantifier; group the first: (?:a*)*)");
    return b_.repeat(atom_f, first_state, static_cast<int>(c.lo), static_cast<int>(c.hi));
  }

  struct Count {
    int64_t lo = 0, hi = 0;  // hi -1: unbounded
    size_t end = 0;          // the offset past the quantifier
  };

  // The quantifier at pos_, consumed: * + ? or a count; false (nothing consumed) when none starts there.
  bool quantifier(Count& c) {
    if (at_end()) return false;
    const char q = peek();
    if (q == '*') c = {0, -1, pos_ + 1};
    else if (q == '+') c = {1, -1, pos_ + 1};
    else if (q == '?') c = {0, 1, pos_ + 1};
    else if (q != '{' || !read_count(pos_, c)) return false;
    if (c.lo > kMaxCount || c.hi > kMaxCount) {
      fail("a repetition count above " + std::to_string(kMaxCount) + " (" + elide(p_.substr(pos_, c.end - pos_), 40) + ")");
    }
    if (c.hi != -1 && c.hi < c.lo) fail("a repetition {m,n} with n < m");
    pos_ = c.end;
    return true;
  }

  bool starts_quantifier(size_t at) const {
    Count unused;
    if (at >= p_.size()) return false;
    const char q = p_[at];
    return q == '*' || q == '+' || q == '?' || (q == '{' && read_count(at, unused));
  }

  // A count at `at` (a '{'), as Python reads one: {m} {m,} {m,n} {,n} {,} (empty bounds: 0 and
  // unbounded); every digit is read, the value saturating, so that a huge count is refused by the limit
  // check, never cut short into a literal. False when the '{' starts no count (then it is a literal '{':
  // x{} x{a} x{ 1} x{1,2).
  bool read_count(size_t at, Count& c) const {
    size_t i = at + 1;
    auto number = [&](int64_t& out) {
      const size_t begin = i;
      for (out = 0; i < p_.size() && p_[i] >= '0' && p_[i] <= '9'; ++i) out = std::min<int64_t>(out * 10 + (p_[i] - '0'), kSaturated);
      return i > begin;
    };
    const bool has_lo = number(c.lo);
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(c.hi)) c.hi = -1;
    } else if (has_lo) {
      c.hi = c.lo;
    } else {
      return false;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    c.end = i + 1;
    return true;
  }

  Fragment atom() {
    const char c = peek();
    switch (c) {
      case '(': return group();
      case '[': return char_class();
      case '.': {
        ++pos_;
        ByteSet all;
        all.set();
        all.reset('\n');
        return b_.ascii_set(all, true);
      }
      case '\\': return escape_atom();
      case '^':
        if (pos_ != 0) fail("'^' is only supported at the start");
        if (starts_quantifier(++pos_)) fail("nothing to repeat (a quantifier after '^')");
        return b_.empty();
      case '$':
        if (pos_ + 1 != p_.size()) fail("'$' is only supported at the end");
        ++pos_;
        return b_.empty();
      case '*': case '+': case '?': fail("nothing to repeat");
      case '{':
        if (starts_quantifier(pos_)) fail("nothing to repeat");
        return literal_char();
      default: return literal_char();
    }
  }

  Fragment literal_char() {
    size_t len = 1;
    const auto lead = static_cast<unsigned char>(peek());
    if (lead >= 0xF0) len = 4;
    else if (lead >= 0xE0) len = 3;
    else if (lead >= 0xC0) len = 2;
    if (pos_ + len > p_.size()) fail("a truncated UTF-8 character");
    const Fragment f = b_.bytes(p_.substr(pos_, len));
    pos_ += len;
    return f;
  }

  // (?&N): a call of rule N (the '(' and '?' consumed).
  Fragment rule_call() {
    pos_ += 2;
    int64_t rule = 0;
    const size_t begin = pos_;
    for (; !at_end() && peek() >= '0' && peek() <= '9'; ++pos_) rule = std::min<int64_t>(rule * 10 + (peek() - '0'), kSaturated);
    if (pos_ == begin || at_end() || peek() != ')') fail("a bad rule call (?&N)");
    if (rule >= num_rules_) {
      fail("a call of rule " + elide(p_.substr(begin, pos_ - begin), 40) + " past the last of " + std::to_string(num_rules_) + " rules");
    }
    ++pos_;
    --depth_;
    return b_.call(static_cast<int32_t>(rule));
  }

  Fragment group() {
    if (++depth_ > kMaxDepth) fail("groups nested over " + std::to_string(kMaxDepth) + " deep");
    ++pos_;
    if (!at_end() && peek() == '?') {
      if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
        pos_ += 2;
      } else if (pos_ + 1 < p_.size() && p_[pos_ + 1] == '&' && num_rules_ > 0) {
        return rule_call();
      } else {
        fail("group syntax '(?' other than '(?:' (lookaround, named groups, flags) is not supported");
      }
    }
    const Fragment f = alternation();
    if (at_end() || peek() != ')') fail("missing ')'");
    ++pos_;
    --depth_;
    return f;
  }

  // One escape in a class or outside: fills `out` (ASCII) and `multibyte` for \W \S \D; returns false if
  // it is a single character (then `single` holds it).
  bool class_escape(ByteSet& out, bool& multibyte, char& single) {
    ++pos_;
    if (at_end()) fail("a trailing backslash");
    const char c = p_[pos_++];
    auto fill = [&](auto pred, bool negate) {
      for (int b = 0; b < 128; ++b) out[b] = out[b] || (pred(b) != negate);
      multibyte = multibyte || negate;
      return true;
    };
    auto digit = [](int b) { return b >= '0' && b <= '9'; };
    auto word = [](int b) { return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_'; };
    auto space = [](int b) { return b == ' ' || (b >= '\t' && b <= '\r'); };
    switch (c) {
      case 'd': return fill(digit, false);
      case 'D': return fill(digit, true);
      case 'w': return fill(word, false);
      case 'W': return fill(word, true);
      case 's': return fill(space, false);
      case 'S': return fill(space, true);
      case 'n': single = '\n'; return false;
      case 't': single = '\t'; return false;
      case 'r': single = '\r'; return false;
      case 'f': single = '\f'; return false;
      case 'v': single = '\v'; return false;
      case 'x': single = static_cast<char>(hex(2)); return false;
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          --pos_;
          fail(std::string("the escape \\") + c + " is not supported");
        }
        single = c;
        return false;
    }
  }

  int hex(int digits) {
    int v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (at_end()) fail("a truncated \\x escape");
      const char h = peek();
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) fail("a bad hex digit");
      v = v * 16 + d;
    }
    if (v >= 128) fail("\\x escapes above 0x7f are not supported");
    return v;
  }

  Fragment escape_atom() {
    if (pos_ + 1 < p_.size() && static_cast<unsigned char>(p_[pos_ + 1]) >= 0x80) {  // an escaped non-ASCII character: itself
      ++pos_;
      return literal_char();
    }
    if (pos_ + 1 < p_.size() && p_[pos_ + 1] == 'u') {  // \uHHHH: one code point as UTF-8
      pos_ += 2;
      int cp = 0;
      for (int i = 0; i < 4; ++i, ++pos_) {
        if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek()))) fail("a bad \\u escape");
        cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(peek())) ? peek() - '0' : (std::tolower(peek()) - 'a' + 10));
      }
      if (cp >= 0xD800 && cp <= 0xDFFF) fail("\\u escapes of surrogates (U+D800..U+DFFF) are not supported: no UTF-8 text holds one");
      return b_.bytes(utf8_encode(static_cast<uint32_t>(cp)));
    }
    ByteSet s;
    bool multibyte = false;
    char single = 0;
    if (class_escape(s, multibyte, single)) return b_.ascii_set(s, multibyte);
    return b_.bytes(std::string(1, single));
  }

  Fragment char_class() {
    ++pos_;
    bool negate = false;
    if (!at_end() && peek() == '^') negate = true, ++pos_;
    ByteSet s;
    bool multibyte = false;
    bool first = true;
    while (!at_end() && (peek() != ']' || first)) {
      first = false;
      int lo;
      char single = 0;
      if (peek() == '\\') {
        if (class_escape(s, multibyte, single)) {
          if (pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']') fail("a bad character range (a class escape as its start)");
          continue;
        }
        lo = static_cast<unsigned char>(single);
      } else {
        lo = static_cast<unsigned char>(p_[pos_++]);
      }
      if (lo >= 128) fail("non-ASCII characters in a class are not supported");
      int hi = lo;
      if (pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '\\') {
          if (class_escape(s, multibyte, single)) fail("a class escape as a range end");
          hi = static_cast<unsigned char>(single);
        } else {
          hi = static_cast<unsigned char>(p_[pos_++]);
        }
        if (hi >= 128) fail("non-ASCII characters in a class are not supported");
        if (hi < lo) fail("a bad character range");
      }
      for (int b = lo; b <= hi; ++b) s[b] = true;
    }
    if (at_end()) fail("missing ']'");
    ++pos_;
    if (negate) {
      s.flip();
      multibyte = !multibyte;
    }
    return b_.ascii_set(s, multibyte);
  }

  static constexpr int kMaxDepth = 200;
  static constexpr int64_t kMaxCount = 1000;               // the largest repetition count
  static constexpr int64_t kSaturated = 1000000000000;     // counts read past this stay at it
  std::string_view p_;
  NfaBuilder& b_;
  int num_rules_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Nfa compile_regex(std::string_view pattern) {
  NfaBuilder b;
  const Fragment f = Parser(pattern, b, 0).run();
  return b.take(f);
}

Fragment compile_regex_into(NfaBuilder& builder, std::string_view pattern, int num_rules) {
  return Parser(pattern, builder, num_rules).run();
}

}  // namespace cbatch
