// UTF-8 validation one sequence at a time. Invalid input is split into "maximal subparts" (Unicode
// 3.9, the rule Python's errors="replace" follows): each maximal subpart becomes one U+FFFD when the
// writer repairs text. Overlong forms, surrogates and code points above U+10FFFF are invalid.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace cbatch {

struct Utf8Sequence {
  size_t length = 0;    // bytes consumed: the whole character, or the maximal invalid subpart
  bool is_valid = false;
};

// The sequence starting at s[pos] (pos < s.size()).
Utf8Sequence next_utf8_sequence(std::string_view s, size_t pos);

bool is_valid_utf8(std::string_view s);

// `s` with every maximal invalid subpart replaced by U+FFFD.
std::string repair_utf8(std::string_view s);

}  // namespace cbatch
