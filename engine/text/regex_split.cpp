// The general Split rule on PCRE2: compile (UTF, UCP, ^ and $ at lines, LF newlines; invalid UTF-8 in the
// text is allowed and never matched), the match loop of Oniguruma's find_iter, then the behaviour folds
// of tokenizers' NormalizedString::split, case by case.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/text/regex_split.hpp"

#include <pcre2.h>

#include <algorithm>
#include <optional>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/text/onig_pattern.hpp"
#include "engine/text/utf8.hpp"

namespace cbatch {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  return pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0 ? "PCRE2 error " + std::to_string(code)
                                                                     : reinterpret_cast<const char*>(buffer);
}

// Bytes from pos to the next character (one past the end at the end, as Oniguruma's iterator steps).
size_t char_length(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 1;
  const Utf8Sequence seq = next_utf8_sequence(text, pos);
  return seq.is_valid ? seq.length : 1;
}

}  // namespace

RegexSplitter::RegexSplitter(std::string_view pattern, Syntax syntax, SplitBehavior behavior, bool invert)
    : pattern_(pattern), behavior_(behavior), invert_(invert) {
  Pcre2Pattern translated;
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  if (syntax == Syntax::kLiteral) {
    translated.text = pattern;
    for (size_t i = 0; i <= pattern.size(); ++i) translated.source_offset.push_back(static_cast<uint32_t>(i));
    options |= PCRE2_LITERAL;
  } else {
    translated = pcre2_from_onig(pattern);
    options |= PCRE2_UCP | PCRE2_MULTILINE;
  }
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  pcre2_set_bsr(context, PCRE2_BSR_UNICODE);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.text.data()), translated.text.size(), options, &error,
                        &offset, context);
  pcre2_compile_context_free(context);
  if (code_ == nullptr) {
    fail_pattern(pattern, translated.source_offset[std::min<size_t>(offset, translated.text.size())],
                 pcre2_message(error));
  }
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // where JIT is missing, pcre2_match interprets
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(code_); }

RegexSplitter::Matcher::Matcher(const RegexSplitter& splitter)
    : splitter_(splitter), match_data_(pcre2_match_data_create(1, nullptr)) {
  if (match_data_ == nullptr) throw std::bad_alloc();
}

RegexSplitter::Matcher::~Matcher() { pcre2_match_data_free(match_data_); }

// tokenizers' find_matches over onig's find_iter: the matches and the text between them, in order.
void RegexSplitter::Matcher::find_matches(std::string_view text) {
  marked_.clear();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t prev = 0;
  size_t search_from = 0;
  std::optional<size_t> last_match_end;
  while (search_from <= text.size()) {
    const int rc = pcre2_match(splitter_.code_, subject, text.size(), search_from, 0, match_data_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      throw Error("the Split regex '" + elide(splitter_.pattern_) + "' failed on a text of " +
                  std::to_string(text.size()) + " bytes: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data_);
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (start == end && last_match_end == end) {  // an empty match where the last one ended
      search_from += char_length(text, search_from);
      continue;
    }
    search_from = end;
    last_match_end = end;
    if (prev != start) marked_.push_back({prev, start, false});
    marked_.push_back({start, end, true});
    prev = end;
  }
  if (prev != text.size()) marked_.push_back({prev, text.size(), false});
}

void RegexSplitter::Matcher::split(std::string_view text, std::vector<ByteSpan>& pieces) {
  find_matches(text);
  if (splitter_.invert_) {
    for (Marked& m : marked_) m.is_match = !m.is_match;
  }
  // The folds below keep tokenizers' order of tests, so that empty matches merge as they do there.
  merged_.clear();
  bool previous_match = false;
  switch (splitter_.behavior_) {
    case SplitBehavior::kIsolated:
      merged_ = marked_;
      for (Marked& m : merged_) m.is_match = false;
      break;
    case SplitBehavior::kRemoved:
      merged_ = marked_;
      break;
    case SplitBehavior::kContiguous:
      for (const Marked& m : marked_) {
        if (m.is_match == previous_match && !merged_.empty()) {
          merged_.back().end = m.end;
        } else {
          merged_.push_back({m.begin, m.end, false});
        }
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Marked& m : marked_) {
        if (m.is_match && !previous_match && !merged_.empty()) {
          merged_.back().end = m.end;
        } else {
          merged_.push_back({m.begin, m.end, false});
        }
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = marked_.rbegin(); it != marked_.rend(); ++it) {
        if (it->is_match && !previous_match && !merged_.empty()) {
          merged_.back().begin = it->begin;
        } else {
          merged_.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(merged_.begin(), merged_.end());
      break;
  }
  for (const Marked& m : merged_) {
    if (!m.is_match && m.begin < m.end) pieces.push_back({m.begin, m.end});  // is_match: removed
  }
}

}  // namespace cbatch
