// JSON numbers within bounds, as regexes (json_schema.cpp's minimum / maximum / exclusiveMinimum /
// exclusiveMaximum). Integers: any bounds, exactly (ranges of digit strings; at most 16 digits, as every
// integer the schema compiler writes). Numbers: integral bounds exactly (integer part by range, the
// fraction's digits then decide at the bound itself; no exponent); a fractional bound throws
// cbatch::Error naming its keyword, as does a range with no number in it.
#pragma once
#include <optional>
#include <string>

namespace cbatch {

struct NumberBounds {
  std::optional<double> lo, hi;        // absent: unbounded on that side
  bool lo_exclusive = false, hi_exclusive = false;
  const char* lo_keyword = "minimum";  // for messages
  const char* hi_keyword = "maximum";
  bool is_set() const { return lo || hi; }
};

std::string bounded_integer_regex(const NumberBounds& bounds);
std::string bounded_number_regex(const NumberBounds& bounds);

// The integers from lo to hi (0 <= lo <= hi), without leading zeros.
std::string digit_range_regex(uint64_t lo, uint64_t hi);

}  // namespace cbatch
