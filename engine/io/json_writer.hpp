// A small streaming JSON writer for output, trace and summary lines. Output is compact with the
// separators of the docs/formats.md examples (", " and ": ") and always valid UTF-8 JSON: strings are
// escaped per RFC 8259 and invalid UTF-8 bytes (text can end inside a character) become U+FFFD.
// The caller keeps the calls balanced; misuse is caught by assert, not reported.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

class JsonWriter {
 public:
  static constexpr int kShortest = -1;  // number(): shortest text that reads back to the same double

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);

  JsonWriter& string(std::string_view s);
  JsonWriter& int64(int64_t v);
  JsonWriter& uint64(uint64_t v);
  // Finite values: `decimals` fixed digits with trailing zeros trimmed (12.500 -> 12.5), or the
  // shortest round-trip form; always keeps a '.' or exponent so readers see a float. NaN/inf -> null.
  JsonWriter& number(double v, int decimals = kShortest);
  JsonWriter& boolean(bool v);
  JsonWriter& null();
  JsonWriter& raw(std::string_view json);  // already valid JSON text, written as one value
  JsonWriter& int_array(std::span<const int32_t> values);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void before_value();
  void open(char bracket);
  void close(char bracket);

  std::string out_;
  std::vector<bool> has_items_;  // one entry per open container: whether it has an item yet
  bool after_key_ = false;
};

// Appends `s` as a quoted, escaped JSON string (U+FFFD for invalid UTF-8).
void append_json_string(std::string& out, std::string_view s);
// `s` as a quoted, escaped JSON string; the canonical id_json of a string id.
std::string json_quote(std::string_view s);

}  // namespace cbatch
