// Where a line's bad number is. simdjson refuses a whole line for one number it cannot read (an integer
// outside [-2^63, 2^64 - 1], a number beyond the double range, or one that is not JSON's number syntax)
// and says only "Problem while parsing a number". This scan of the raw line finds the first such number
// and the field that holds it, so the error line can name both ("body.seed", "prompt_token_ids[3]").
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace cbatch {

struct BadNumber {
  std::string field;  // its path from the line's root: keys joined by '.', list items as [i]; "" at the root
  std::string text;   // the number as written
  bool is_syntax = false;  // not JSON number syntax (01, 1., -): else well-formed but out of range
};

// The first number of `json` that simdjson cannot read, or nullopt when there is none (or the text is
// too malformed to scan: the caller then keeps simdjson's own message).
std::optional<BadNumber> find_bad_number(std::string_view json);

// "field 'F' holds N, ...": the message for a line refused for `bad`.
std::string describe_bad_number(const BadNumber& bad);

}  // namespace cbatch
