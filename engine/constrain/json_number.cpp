// Digit-string ranges split by length, then by leading digit (the classic range-to-regex construction).
#include "engine/constrain/json_number.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

constexpr uint64_t kMaxMagnitude = 9999999999999999;  // 16 digits
constexpr const char* kFracAny = "(?:\\.\\d{1,16})?";
constexpr const char* kFracZero = "(?:\\.0{1,16})?";
constexpr const char* kFracNonzero = "\\.0{0,15}[1-9]\\d{0,15}";

std::string join(const std::vector<std::string>& alternatives) {
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(?:";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? "|" : "") + alternatives[i];
  return out + ")";
}

// "-" before a regex (built by appending: GCC 12 warns falsely on "-" + a temporary string).
std::string negated(const std::string& regex) {
  std::string out(1, '-');
  return out += regex;
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string(1, lo);
  if (lo == '0' && hi == '9') return "\\d";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) { return n == 0 ? "" : "\\d{" + std::to_string(n) + "}"; }

// Digit strings from lo to hi, both of the same length.
std::string same_length(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "";
  if (lo[0] == hi[0]) return lo[0] + same_length(lo.substr(1), hi.substr(1));
  const std::string low_rest = lo.substr(1), high_rest = hi.substr(1);
  const bool low_full = low_rest.find_first_not_of('0') == std::string::npos;
  const bool high_full = high_rest.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> parts;
  char first = lo[0], last = hi[0];
  if (!low_full) parts.push_back(lo[0] + same_length(low_rest, std::string(n - 1, '9'))), ++first;
  if (!high_full) --last;
  if (first <= last) parts.push_back(digit_class(first, last) + any_digits(n - 1));
  if (!high_full) parts.push_back(hi[0] + same_length(std::string(n - 1, '0'), high_rest));
  return join(parts);
}

// The non-negative numbers y with lo <(=) y <(=) hi (integral bounds; hi absent: no upper bound).
void nonnegative_numbers(uint64_t lo, bool lo_excl, std::optional<uint64_t> hi, bool hi_excl, std::vector<std::string>& out) {
  if (hi && lo > *hi) return;
  if (hi && lo == *hi) {
    if (!lo_excl && !hi_excl) out.push_back(std::to_string(lo) + kFracZero);
    return;
  }
  out.push_back(std::to_string(lo) + (lo_excl ? kFracNonzero : kFracAny));
  const uint64_t upper = hi ? *hi - 1 : kMaxMagnitude;
  if (lo + 1 <= upper) out.push_back(digit_range_regex(lo + 1, upper) + kFracAny);
  if (hi && !hi_excl) out.push_back(std::to_string(*hi) + kFracZero);
}

uint64_t magnitude(double v) { return static_cast<uint64_t>(std::min(std::fabs(v), static_cast<double>(kMaxMagnitude))); }

void require_integral(std::optional<double> v, const char* keyword) {
  if (v && (std::floor(*v) != *v || std::fabs(*v) > 1e15)) {
    throw Error(std::string("JSON schema keyword '") + keyword + "' on a number is supported with an integral bound up to 1e15 (got " +
                std::to_string(*v) + ")");
  }
}

[[noreturn]] void fail_empty(const NumberBounds& b) {
  throw Error(std::string("JSON schema: '") + b.lo_keyword + "' and '" + b.hi_keyword + "' leave no number");
}

}  // namespace

std::string digit_range_regex(uint64_t lo, uint64_t hi) {
  std::vector<std::string> parts;
  for (uint64_t len_lo = 1, len_hi = 9; len_lo <= hi; len_lo = len_hi + 1, len_hi = len_hi * 10 + 9) {
    const uint64_t a = std::max(lo, len_lo == 1 ? 0 : len_lo), b = std::min(hi, len_hi);
    if (a <= b) parts.push_back(same_length(std::to_string(a), std::to_string(b)));
    if (len_hi >= hi) break;
  }
  return join(parts);
}

std::string bounded_integer_regex(const NumberBounds& b) {
  // As integers: the smallest allowed and the largest allowed, clamped to 16 digits.
  const double lo = !b.lo ? -static_cast<double>(kMaxMagnitude) : b.lo_exclusive ? std::floor(*b.lo) + 1 : std::ceil(*b.lo);
  const double hi = !b.hi ? static_cast<double>(kMaxMagnitude) : b.hi_exclusive ? std::ceil(*b.hi) - 1 : std::floor(*b.hi);
  if (lo > static_cast<double>(kMaxMagnitude) || hi < -static_cast<double>(kMaxMagnitude)) {
    throw Error(std::string("JSON schema: '") + (lo > 0 ? b.lo_keyword : b.hi_keyword) +
                "' leaves no integer of at most 16 digits (the longest written)");
  }
  if (lo > hi) fail_empty(b);
  std::vector<std::string> parts;
  if (lo < 0) parts.push_back(negated(digit_range_regex(hi < 0 ? magnitude(hi) : 1, magnitude(lo))));
  if (hi >= 0) parts.push_back(digit_range_regex(lo > 0 ? magnitude(lo) : 0, magnitude(hi)));
  return join(parts);
}

std::string bounded_number_regex(const NumberBounds& b) {
  require_integral(b.lo, b.lo_keyword);
  require_integral(b.hi, b.hi_keyword);
  std::vector<std::string> parts;
  if (!b.lo || *b.lo < 0) {  // negative numbers: y = -x > 0
    std::vector<std::string> neg;
    const bool from_hi = b.hi && *b.hi < 0;
    nonnegative_numbers(from_hi ? magnitude(*b.hi) : 0, from_hi ? b.hi_exclusive : true,
                        b.lo ? std::optional<uint64_t>(magnitude(*b.lo)) : std::nullopt, b.lo_exclusive, neg);
    if (!neg.empty()) parts.push_back(negated(join(neg)));
  }
  if (!b.hi || *b.hi > 0 || (*b.hi == 0 && !b.hi_exclusive)) {
    const bool from_lo = b.lo && *b.lo >= 0;
    nonnegative_numbers(from_lo ? magnitude(*b.lo) : 0, from_lo && b.lo_exclusive,
                        b.hi ? std::optional<uint64_t>(magnitude(*b.hi)) : std::nullopt, b.hi_exclusive, parts);
  }
  if (parts.empty()) fail_empty(b);
  return join(parts);
}

}  // namespace cbatch
