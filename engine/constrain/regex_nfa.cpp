// Recursive descent over the pattern, building Thompson fragments (start, end) in one growing NFA.
#include "engine/constrain/regex_nfa.hpp"

#include <algorithm>
#include <bitset>
#include <cctype>

#include "engine/core/error.hpp"

namespace cbatch {
namespace {

using ByteSet = std::bitset<128>;  // an ASCII class; non-ASCII characters are handled by `any_multibyte`

struct Fragment {
  int32_t start;
  int32_t end;
};

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Nfa run() {
    const Fragment f = alternation();
    if (pos_ != p_.size()) fail(p_[pos_] == ')' ? "unbalanced ')'" : "unexpected character");
    nfa_.start = f.start;
    nfa_.accept = f.end;
    return std::move(nfa_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("invalid regex '" + std::string(p_) + "': " + what + " at offset " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  int32_t new_state() {
    if (nfa_.states.size() >= kMaxStates) fail("a pattern this large (over " + std::to_string(kMaxStates) + " states)");
    nfa_.states.emplace_back();
    return static_cast<int32_t>(nfa_.states.size() - 1);
  }
  void edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) { nfa_.states[from].edges.push_back({lo, hi, to}); }
  void eps(int32_t from, int32_t to) { nfa_.states[from].epsilon.push_back(to); }

  Fragment empty() {
    const int32_t s = new_state();
    return {s, s};
  }
  Fragment bytes(std::string_view text) {
    Fragment f = empty();
    for (unsigned char c : text) {
      const int32_t next = new_state();
      edge(f.end, c, c, next);
      f.end = next;
    }
    return f;
  }
  // Any UTF-8 character of two to four bytes (non-ASCII), as well-formed sequences.
  void any_multibyte(int32_t from, int32_t to) {
    const int32_t c1 = new_state(), c2 = new_state(), c3 = new_state();
    edge(from, 0xC2, 0xDF, c1);
    edge(from, 0xE0, 0xEF, c2);
    edge(from, 0xF0, 0xF4, c3);
    edge(c3, 0x80, 0xBF, c2);
    edge(c2, 0x80, 0xBF, c1);
    edge(c1, 0x80, 0xBF, to);
  }
  Fragment set(const ByteSet& ascii, bool with_multibyte) {
    const Fragment f{new_state(), new_state()};
    for (int c = 0; c < 128; ++c) {
      if (!ascii[c]) continue;
      int e = c;
      while (e + 1 < 128 && ascii[e + 1]) ++e;
      edge(f.start, static_cast<uint8_t>(c), static_cast<uint8_t>(e), f.end);
      c = e;
    }
    if (with_multibyte) any_multibyte(f.start, f.end);
    return f;
  }
  // A copy of fragment f, whose states are [first_state, last), for counted repetition.
  Fragment clone(const Fragment& f, int32_t first_state, int32_t last) {
    const int32_t offset = static_cast<int32_t>(nfa_.states.size()) - first_state;
    for (int32_t s = first_state; s < last; ++s) {
      Nfa::State copy = nfa_.states[s];
      for (NfaEdge& e : copy.edges) e.to += offset;
      for (int32_t& t : copy.epsilon) t += offset;
      nfa_.states.push_back(std::move(copy));
    }
    return {f.start + offset, f.end + offset};
  }

  Fragment alternation() {
    Fragment left = sequence();
    if (at_end() || peek() != '|') return left;
    const Fragment f{new_state(), new_state()};
    eps(f.start, left.start);
    eps(left.end, f.end);
    while (!at_end() && peek() == '|') {
      ++pos_;
      const Fragment right = sequence();
      eps(f.start, right.start);
      eps(right.end, f.end);
    }
    return f;
  }

  Fragment sequence() {
    Fragment f = empty();
    while (!at_end() && peek() != '|' && peek() != ')') {
      const Fragment next = repeated();
      eps(f.end, next.start);
      f.end = next.end;
    }
    return f;
  }

  Fragment repeated() {
    const int32_t first_state = static_cast<int32_t>(nfa_.states.size());
    Fragment atom_f = atom();
    while (!at_end()) {
      int lo, hi;  // hi -1: unbounded
      const char c = peek();
      if (c == '*') lo = 0, hi = -1, ++pos_;
      else if (c == '+') lo = 1, hi = -1, ++pos_;
      else if (c == '?') lo = 0, hi = 1, ++pos_;
      else if (c == '{' && counted(lo, hi)) {}
      else break;
      if (!at_end() && peek() == '?') ++pos_;  // lazy: the same language
      if (!at_end() && peek() == '+') fail("possessive quantifiers are not supported");
      atom_f = repeat(atom_f, first_state, lo, hi);
    }
    return atom_f;
  }

  // {n}, {n,}, {n,m}: false (nothing consumed) when '{' does not start one, as in Python (a literal '{').
  bool counted(int& lo, int& hi) {
    size_t i = pos_ + 1;
    auto number = [&](int& out) {
      const size_t begin = i;
      out = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9' && out < 100000) out = out * 10 + (p_[i++] - '0');
      return i > begin;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(hi)) hi = -1;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    pos_ = i + 1;
    if (hi != -1 && hi < lo) fail("a repetition {m,n} with n < m");
    if (lo > 1000 || hi > 1000) fail("a repetition count above 1000");
    return true;
  }

  Fragment repeat(Fragment atom_f, int32_t first_state, int lo, int hi) {
    const int32_t atom_end = static_cast<int32_t>(nfa_.states.size());
    const int copies = std::max(lo, hi == -1 ? 1 : hi);
    std::vector<Fragment> pieces{atom_f};
    for (int i = 1; i < copies; ++i) {
      if (nfa_.states.size() + static_cast<size_t>(atom_end - first_state) >= kMaxStates) {
        fail("a pattern this large (over " + std::to_string(kMaxStates) + " states)");
      }
      pieces.push_back(clone(atom_f, first_state, atom_end));
    }
    Fragment f = empty();
    for (int i = 0; i < lo; ++i) {
      eps(f.end, pieces[static_cast<size_t>(i)].start);
      f.end = pieces[static_cast<size_t>(i)].end;
    }
    if (hi == -1) {  // then any number more: a loop through one more copy
      const Fragment loop = lo > 0 ? pieces[static_cast<size_t>(lo - 1)] : pieces[0];
      if (lo > 0) {
        eps(loop.end, loop.start);
      } else {
        const int32_t end = new_state();
        eps(f.end, loop.start);
        eps(loop.end, f.end);
        eps(f.end, end);
        f.end = end;
      }
      return f;
    }
    const int32_t end = new_state();
    eps(f.end, end);
    for (int i = lo; i < hi; ++i) {
      eps(f.end, pieces[static_cast<size_t>(i)].start);
      f.end = pieces[static_cast<size_t>(i)].end;
      eps(f.end, end);
    }
    f.end = end;
    return f;
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
        return set(all, true);
      }
      case '\\': return escape_atom();
      case '^':
        if (pos_ != 0) fail("'^' is only supported at the start");
        ++pos_;
        return empty();
      case '$':
        if (pos_ + 1 != p_.size()) fail("'$' is only supported at the end");
        ++pos_;
        return empty();
      case '*': case '+': case '?': fail("nothing to repeat");
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
    const Fragment f = bytes(p_.substr(pos_, len));
    pos_ += len;
    return f;
  }

  Fragment group() {
    if (++depth_ > kMaxDepth) fail("groups nested over " + std::to_string(kMaxDepth) + " deep");
    ++pos_;
    if (!at_end() && peek() == '?') {
      if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
        pos_ += 2;
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
    if (pos_ + 1 < p_.size() && p_[pos_ + 1] == 'u') {  // \uHHHH: one code point as UTF-8
      pos_ += 2;
      int cp = 0;
      for (int i = 0; i < 4; ++i, ++pos_) {
        if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek()))) fail("a bad \\u escape");
        cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(peek())) ? peek() - '0' : (std::tolower(peek()) - 'a' + 10));
      }
      std::string utf8;
      if (cp < 0x80) utf8 += static_cast<char>(cp);
      else if (cp < 0x800) utf8 += static_cast<char>(0xC0 | (cp >> 6)), utf8 += static_cast<char>(0x80 | (cp & 0x3F));
      else utf8 += static_cast<char>(0xE0 | (cp >> 12)), utf8 += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
           utf8 += static_cast<char>(0x80 | (cp & 0x3F));
      return bytes(utf8);
    }
    ByteSet s;
    bool multibyte = false;
    char single = 0;
    if (class_escape(s, multibyte, single)) return set(s, multibyte);
    return bytes(std::string(1, single));
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
        if (class_escape(s, multibyte, single)) continue;
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
    return set(s, multibyte);
  }

  static constexpr size_t kMaxStates = 200000;
  static constexpr int kMaxDepth = 200;
  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;
  Nfa nfa_;
};

}  // namespace

Nfa compile_regex(std::string_view pattern) { return Parser(pattern).run(); }

std::string choice_regex(const std::vector<std::string>& choices) {
  std::string out;
  for (const std::string& choice : choices) {
    if (!out.empty()) out += '|';
    out += "(?:";
    for (char c : choice) {
      if (std::string_view("\\.^$|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
    out += ')';
  }
  return out;
}

}  // namespace cbatch
