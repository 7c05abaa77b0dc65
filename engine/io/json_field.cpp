// Field readers over simdjson DOM elements; every failure goes through fail_field.
#include "engine/io/json_field.hpp"

#include <cmath>
#include <limits>

#include "engine/base/elide.hpp"

namespace cbatch {
namespace {

constexpr size_t kMaxShownBytes = 60;

}  // namespace

std::string show_value(simdjson::dom::element v) { return elide(simdjson::minify(v), kMaxShownBytes); }

void fail_field(std::string_view field, std::string_view expectation, simdjson::dom::element got) {
  throw FieldError("field '" + std::string(field) + "' must be " + std::string(expectation) +
                   " (got " + show_value(got) + ")");
}

std::optional<simdjson::dom::element> FieldSet::find(std::string_view key) const {
  simdjson::dom::element v;
  if (obj.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  return v;
}

std::string FieldSet::name(std::string_view key) const {
  return std::string(prefix) + std::string(key);
}

std::string_view get_string(simdjson::dom::element v, const std::string& field) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) fail_field(field, "a string", v);
  return s;
}

bool get_bool(simdjson::dom::element v, const std::string& field) {
  bool b = false;
  if (v.get_bool().get(b) != simdjson::SUCCESS) fail_field(field, "true or false", v);
  return b;
}

int64_t get_int(simdjson::dom::element v, const std::string& field, int64_t lo, int64_t hi,
                std::string_view expectation) {
  int64_t x = 0;
  // get_int64 refuses doubles (5.0) and integers above INT64_MAX.
  const bool is_integer = v.get_int64().get(x) == simdjson::SUCCESS;
  if (is_integer && x >= lo && x <= hi) return x;
  uint64_t big = 0;
  const bool too_big = (is_integer && x > hi) || (!is_integer && v.get_uint64().get(big) == simdjson::SUCCESS);
  const std::string bound = std::to_string(hi);
  if (too_big && expectation.find(bound) == std::string_view::npos) {
    fail_field(field, std::string(expectation) + ", at most " + bound, v);  // the message names the bound
  }
  fail_field(field, expectation, v);
}

float get_float(simdjson::dom::element v, const std::string& field, bool (*is_in_range)(double),
                std::string_view expectation) {
  double x = 0;
  if (!v.is_number() || v.get_double().get(x) != simdjson::SUCCESS || !is_in_range(x) ||
      !std::isfinite(static_cast<float>(x))) {
    fail_field(field, expectation, v);
  }
  return static_cast<float>(x);
}

std::vector<int32_t> get_token_ids(simdjson::dom::element v, const std::string& field,
                                   size_t max_count) {
  simdjson::dom::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) {
    fail_field(field, "a list of non-negative integers", v);
  }
  if (arr.size() > max_count) {
    throw FieldError("field '" + field + "' must have at most " + std::to_string(max_count) +
                     " ids (got " + std::to_string(arr.size()) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (simdjson::dom::element e : arr) {
    int64_t x = 0;
    if (e.get_int64().get(x) != simdjson::SUCCESS || x < 0 ||
        x > std::numeric_limits<int32_t>::max()) {
      // The element's name is built only here: lists can hold millions of ids.
      fail_field(field + "[" + std::to_string(ids.size()) + "]", "a non-negative integer (a token id)",
                 e);
    }
    ids.push_back(static_cast<int32_t>(x));
  }
  return ids;
}

}  // namespace cbatch
