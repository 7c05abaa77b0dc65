// JsonWriter: separators, string escaping with UTF-8 repair, and number formatting (std::to_chars).
#include "engine/io/json_writer.hpp"

#include <cassert>
#include <charconv>
#include <cmath>

#include "engine/text/utf8.hpp"

namespace cbatch {
namespace {

bool is_plain_ascii(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

void append_escaped_control(std::string& out, unsigned char c) {
  switch (c) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: {
      static const char kHex[] = "0123456789abcdef";
      const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, sizeof esc);
    }
  }
}

// "12.500" -> "12.5", "3.000" -> "3.0"; text without a '.' is left alone.
void trim_fraction_zeros(std::string& s) {
  const size_t dot = s.find('.');
  if (dot == std::string::npos) return;
  size_t end = s.size();
  while (end > dot + 2 && s[end - 1] == '0') --end;
  s.resize(end);
}

std::string format_double(double v, int decimals) {
  assert(decimals == JsonWriter::kShortest || (decimals >= 0 && decimals <= 30));
  char buf[400];  // fixed notation of 1e308 needs ~310 characters
  const auto res = decimals == JsonWriter::kShortest
                       ? std::to_chars(buf, buf + sizeof buf, v)
                       : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  assert(res.ec == std::errc());
  std::string s(buf, res.ptr);
  if (decimals != JsonWriter::kShortest) trim_fraction_zeros(s);  // fixed notation has no exponent
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  size_t run = 0;  // start of the pending run of bytes copied as they are
  for (size_t pos = 0; pos < s.size();) {
    const auto c = static_cast<unsigned char>(s[pos]);
    if (is_plain_ascii(c)) {
      ++pos;
      continue;
    }
    if (c >= 0x80) {
      const Utf8Sequence seq = next_utf8_sequence(s, pos);
      if (seq.is_valid) {
        pos += seq.length;
        continue;
      }
      out.append(s.substr(run, pos - run));
      out += "\xEF\xBF\xBD";
      pos += seq.length;
    } else {
      out.append(s.substr(run, pos - run));
      append_escaped_control(out, c);
      ++pos;
    }
    run = pos;
  }
  out.append(s.substr(run));
  out += '"';
}

std::string json_quote(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (has_items_.empty()) return;
  if (has_items_.back()) out_ += ", ";
  has_items_.back() = true;
}

void JsonWriter::open(char bracket) {
  before_value();
  out_ += bracket;
  has_items_.push_back(false);
}

void JsonWriter::close(char bracket) {
  assert(!has_items_.empty() && !after_key_);
  has_items_.pop_back();
  out_ += bracket;
}

JsonWriter& JsonWriter::begin_object() { open('{'); return *this; }
JsonWriter& JsonWriter::end_object() { close('}'); return *this; }
JsonWriter& JsonWriter::begin_array() { open('['); return *this; }
JsonWriter& JsonWriter::end_array() { close(']'); return *this; }

JsonWriter& JsonWriter::key(std::string_view name) {
  assert(!after_key_);
  before_value();
  append_json_string(out_, name);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::string(std::string_view s) {
  before_value();
  append_json_string(out_, s);
  return *this;
}

JsonWriter& JsonWriter::int64(int64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::uint64(uint64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::number(double v, int decimals) {
  if (!std::isfinite(v)) return null();
  before_value();
  out_ += format_double(v, decimals);
  return *this;
}

JsonWriter& JsonWriter::boolean(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

JsonWriter& JsonWriter::int_array(std::span<const int32_t> values) {
  begin_array();
  for (int32_t v : values) int64(v);
  return end_array();
}

}  // namespace cbatch
