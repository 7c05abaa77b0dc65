// Typed access to the fields of a parsed JSON line (simdjson DOM), for the request parser. A wrong
// type or value throws FieldError whose message names the field and shows the value, e.g.
// "field 'top_p' must be a number in (0, 1] (got 1.5)"; the parser prefixes "line N: ".
// A field whose value is null counts as absent (OpenAI clients send "stop": null and the like).
#pragma once
#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

class FieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The value as compact JSON, elided after about 60 bytes ("... (N bytes)" marks a cut).
std::string show_value(simdjson::dom::element v);

// Throws "field 'NAME' must be EXPECTATION (got VALUE)".
[[noreturn]] void fail_field(std::string_view field, std::string_view expectation,
                             simdjson::dom::element got);

// An object whose fields are named with a prefix in messages ("body." inside an OpenAI body).
struct FieldSet {
  simdjson::dom::object obj;
  std::string_view prefix;

  std::optional<simdjson::dom::element> find(std::string_view key) const;  // absent or null: nullopt
  std::string name(std::string_view key) const;
};

std::string_view get_string(simdjson::dom::element v, const std::string& field);
bool get_bool(simdjson::dom::element v, const std::string& field);
// A JSON integer in [lo, hi]; anything else fails with `expectation` (an integer above hi: "EXPECTATION,
// at most HI" unless the expectation names hi already).
int64_t get_int(simdjson::dom::element v, const std::string& field, int64_t lo, int64_t hi,
                std::string_view expectation);
// A JSON number for which `is_in_range` holds and that stays finite as a float.
float get_float(simdjson::dom::element v, const std::string& field, bool (*is_in_range)(double),
                std::string_view expectation);
// A list of at most `max_count` integers in [0, INT32_MAX]; elements are named "field[i]".
std::vector<int32_t> get_token_ids(simdjson::dom::element v, const std::string& field,
                                   size_t max_count);

}  // namespace cbatch
