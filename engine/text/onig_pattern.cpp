// The Oniguruma -> PCRE2 rewrite: one pass over the pattern that copies it byte by byte except at escapes,
// character classes, option groups and intervals, and records where each output byte came from, so that
// a PCRE2 compile error can name the offset in the pattern the user wrote.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/text/onig_pattern.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cctype>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

// Oniguruma's \w in its Unicode mode (measured against the Oniguruma inside `tokenizers` on every code
// point): Alphabetic, marks, Nd and Pc; written alone (not inside a class) it also takes the Latin-1 digits
// ²³¹¼½¾ (its Latin-1 ctype table), and so does its \b.
constexpr std::string_view kClassWordItems = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc})";
constexpr std::string_view kWord = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE}])";
constexpr std::string_view kNotWord = R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE}])";

struct Category {
  std::string_view loose_name;  // lower case, without spaces, '_' and '-'
  std::string_view pcre2_name;
};

// Unicode's general category names, long (which PCRE2 10.42 does not know) and short.
constexpr Category kCategories[] = {
    {"letter", "L"}, {"casedletter", "L&"}, {"uppercaseletter", "Lu"}, {"lowercaseletter", "Ll"},
    {"titlecaseletter", "Lt"}, {"modifierletter", "Lm"}, {"otherletter", "Lo"}, {"mark", "M"},
    {"combiningmark", "M"}, {"nonspacingmark", "Mn"}, {"spacingmark", "Mc"}, {"enclosingmark", "Me"},
    {"number", "N"}, {"decimalnumber", "Nd"}, {"letternumber", "Nl"}, {"othernumber", "No"},
    {"punctuation", "P"}, {"connectorpunctuation", "Pc"}, {"dashpunctuation", "Pd"},
    {"openpunctuation", "Ps"}, {"closepunctuation", "Pe"}, {"initialpunctuation", "Pi"},
    {"finalpunctuation", "Pf"}, {"otherpunctuation", "Po"}, {"symbol", "S"}, {"mathsymbol", "Sm"},
    {"currencysymbol", "Sc"}, {"modifiersymbol", "Sk"}, {"othersymbol", "So"}, {"separator", "Z"},
    {"spaceseparator", "Zs"}, {"lineseparator", "Zl"}, {"paragraphseparator", "Zp"}, {"other", "C"},
    {"control", "Cc"}, {"format", "Cf"}, {"surrogate", "Cs"}, {"privateuse", "Co"}, {"unassigned", "Cn"},
    {"lc", "L&"}, {"l", "L"}, {"lu", "Lu"}, {"ll", "Ll"}, {"lt", "Lt"}, {"lm", "Lm"}, {"lo", "Lo"}, {"m", "M"},
    {"mn", "Mn"}, {"mc", "Mc"}, {"me", "Me"}, {"n", "N"}, {"nd", "Nd"}, {"nl", "Nl"}, {"no", "No"}, {"p", "P"},
    {"pc", "Pc"}, {"pd", "Pd"}, {"ps", "Ps"}, {"pe", "Pe"}, {"pi", "Pi"}, {"pf", "Pf"}, {"po", "Po"}, {"s", "S"},
    {"sm", "Sm"}, {"sc", "Sc"}, {"sk", "Sk"}, {"so", "So"}, {"z", "Z"}, {"zs", "Zs"}, {"zl", "Zl"}, {"zp", "Zp"},
    {"c", "C"}, {"cc", "Cc"}, {"cf", "Cf"}, {"cs", "Cs"}, {"co", "Co"}, {"cn", "Cn"},
};

// Whether PCRE2 knows name as a script (and not as a category or a binary property).
bool is_pcre2_script(const std::string& name) {
  const std::string probe = "\\p{sc:" + name + "}";
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(probe.data()), probe.size(), PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  pcre2_code_free(code);
  return code != nullptr;
}

std::string loose(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c != ' ' && c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

class Translator {
 public:
  explicit Translator(std::string_view pattern) : p_(pattern) {}

  Pcre2Pattern run() {
    while (pos_ < p_.size()) {
      switch (p_[pos_]) {
        case '\\': escape(false); break;
        case '[': character_class(); break;
        case '(': group_open(); break;
        case '{': interval(); break;
        default: copy(1);
      }
    }
    out_.source_offset.push_back(static_cast<uint32_t>(p_.size()));
    return std::move(out_);
  }

 private:
  void emit(std::string_view text, size_t from) {
    out_.text += text;
    out_.source_offset.insert(out_.source_offset.end(), text.size(), static_cast<uint32_t>(from));
  }
  void copy(size_t n) {
    for (size_t i = 0; i < n && pos_ < p_.size(); ++i, ++pos_) emit(p_.substr(pos_, 1), pos_);
  }
  [[noreturn]] void fail(size_t at, const std::string& reason) const { fail_pattern(p_, at, reason); }
  char at(size_t i) const { return i < p_.size() ? p_[i] : '\0'; }

  // At a backslash: the escape, rewritten where the dialects differ.
  void escape(bool in_class) {
    const size_t start = pos_;
    const char c = at(pos_ + 1);
    std::string_view with;
    switch (c) {
      case 's': with = R"(\p{White_Space})"; break;
      case 'S': with = R"(\P{White_Space})"; break;
      case 'w': with = in_class ? kClassWordItems : kWord; break;
      case 'h': with = in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;
      case 'v': with = R"(\x{0B})"; break;
      case 'W':
      case 'H':
        if (in_class) fail(start, std::string("\\") + c + " inside a class is not supported");
        with = c == 'W' ? kNotWord : "[^0-9a-fA-F]";
        break;
      case 'O':
        if (!in_class) with = "(?s:.)";
        break;
      case 'b':
      case 'B':
        if (!in_class) {
          boundary(c == 'b', start);
          return;
        }
        break;
      case 'X': fail(start, "\\X is not supported (PCRE2 and Oniguruma cut grapheme clusters differently)");
      case 'y':
      case 'Y':
      case 'Q':
      case 'E': fail(start, std::string("\\") + c + " is not supported");
      case 'u':
        if (is_hex(at(pos_ + 2)) && is_hex(at(pos_ + 3)) && is_hex(at(pos_ + 4)) && is_hex(at(pos_ + 5))) {
          emit("\\x{" + std::string(p_.substr(pos_ + 2, 4)) + "}", start);
          pos_ += 6;
          return;
        }
        break;
      case 'p':
      case 'P':
        if (at(pos_ + 2) == '{' && property()) return;
        break;
      default: break;
    }
    if (with.empty()) {
      copy(c == '\0' ? 1 : 2);  // as written: PCRE2 reads it as Oniguruma does, or reports it
    } else {
      emit(with, start);
      pos_ += 2;
    }
  }

  // \b or \B over Oniguruma's word class, as lookarounds.
  void boundary(bool is_boundary, size_t start) {
    const std::string w(kWord);
    emit(is_boundary ? "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
                     : "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))",
         start);
    pos_ += 2;
  }

  // \p{Name} or \P{Name} (also \p{^Name}): a long category name as its short one, a script as sc:Name
  // (PCRE2's plain \p{Han} is the Script_Extensions property, Oniguruma's is Script); false (nothing
  // consumed) when there is no closing brace.
  bool property() {
    const size_t close = p_.find('}', pos_ + 3);
    if (close == std::string_view::npos) return false;
    std::string_view name = p_.substr(pos_ + 3, close - pos_ - 3);
    const bool caret = !name.empty() && name[0] == '^';
    if (caret) name.remove_prefix(1);
    const bool negated = (p_[pos_ + 1] == 'P') != caret;
    std::string mapped(name);
    const std::string key = loose(name);
    bool is_category = false;
    for (const Category& category : kCategories) {
      if (category.loose_name == key) {
        mapped = category.pcre2_name;
        is_category = true;
      }
    }
    if (!is_category && is_pcre2_script(mapped)) mapped = "sc:" + mapped;
    emit((negated ? "\\P{" : "\\p{") + mapped + "}", pos_);
    pos_ = close + 1;
    return true;
  }

  void character_class() {
    copy(1);  // '['
    if (at(pos_) == '^') copy(1);
    if (at(pos_) == ']') copy(1);  // a ']' first is a literal in both
    class_items();
    copy(1);  // ']' (at the end of the pattern: nothing, and PCRE2 reports the open class)
  }

  // The items of a class up to its ']'; a nested class's items join them (Oniguruma: a union).
  void class_items() {
    while (pos_ < p_.size() && p_[pos_] != ']') {
      const char c = p_[pos_];
      if (c == '\\') {
        escape(true);
      } else if (c == '&' && at(pos_ + 1) == '&') {
        fail(pos_, "class intersection (&&) is not supported");
      } else if (c == '[') {
        if (at(pos_ + 1) == ':') fail(pos_, "POSIX bracket classes are not supported");
        if (at(pos_ + 1) == '^') fail(pos_, "a negated class inside a class is not supported");
        const size_t open = pos_++;
        if (at(pos_) == ']') {
          emit("\\]", pos_);
          ++pos_;
        }
        class_items();
        if (pos_ >= p_.size()) fail(open, "the class is not closed");
        ++pos_;  // the nested class's ']'
      } else {
        copy(1);
      }
    }
  }

  // At '(': an option group's letters mapped (m -> s), a comment copied whole, anything else as written.
  void group_open() {
    if (at(pos_ + 1) != '?') {
      copy(1);
      return;
    }
    if (at(pos_ + 2) == '#') {
      const size_t close = p_.find(')', pos_);
      copy(close == std::string_view::npos ? p_.size() - pos_ : close - pos_ + 1);
      return;
    }
    size_t end = pos_ + 2;
    while (end < p_.size() && (std::isalpha(static_cast<unsigned char>(p_[end])) || p_[end] == '-')) ++end;
    if (end == pos_ + 2 || (at(end) != ':' && at(end) != ')')) {
      copy(2);  // (?=, (?!, (?<name>, (?>, ...
      return;
    }
    copy(2);
    for (; pos_ < end; ++pos_) {
      const char c = p_[pos_];
      if (c != 'i' && c != 'm' && c != 'x' && c != '-') {
        fail(pos_, std::string("the option '") + c + "' is not supported (i, m, x are)");
      }
      emit(std::string(1, c == 'm' ? 's' : c), pos_);
    }
  }

  // At '{': an interval {n}, {n,}, {n,m} or {,m} (written {0,m} for PCRE2), else a literal '{'.
  void interval() {
    const size_t start = pos_;
    size_t i = pos_ + 1;
    while (is_digit(at(i))) ++i;
    const std::string_view low = p_.substr(pos_ + 1, i - pos_ - 1);
    std::string_view high;
    const bool has_comma = at(i) == ',';
    if (has_comma) {
      const size_t from = ++i;
      while (is_digit(at(i))) ++i;
      high = p_.substr(from, i - from);
    }
    if (at(i) != '}' || (low.empty() && high.empty())) {
      copy(1);
      return;
    }
    std::string written = "{";
    written.append(low.empty() ? "0" : low);
    if (has_comma) written.append(",").append(high);
    emit(written.append("}"), start);
    pos_ = i + 1;
    if (at(pos_) == '+') {
      fail(pos_, "an interval followed by '+' is not supported (Oniguruma repeats the repeat, PCRE2 makes "
                 "it possessive; write (?:X{n,m})+)");
    }
  }

  std::string_view p_;
  size_t pos_ = 0;
  Pcre2Pattern out_;
};

}  // namespace

Pcre2Pattern pcre2_from_onig(std::string_view pattern) { return Translator(pattern).run(); }

void fail_pattern(std::string_view pattern, size_t offset, const std::string& reason) {
  throw Error("'" + elide(pattern) + "' is not a regex cbatch can run: " + reason + " at offset " +
              std::to_string(offset) + " ('" + elide(pattern.substr(std::min(offset, pattern.size())), 24) + "')");
}

}  // namespace cbatch
