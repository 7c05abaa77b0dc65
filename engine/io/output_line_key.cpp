// Keys of output lines in both shapes (moved here from resume.cpp so that merge uses the same rules).
#include "engine/io/output_line_key.hpp"

#include <charconv>
#include <system_error>

#include "engine/io/json_writer.hpp"

namespace cbatch {
namespace {

std::optional<int64_t> positive_int(simdjson::dom::element v) {
  int64_t n = 0;
  if (v.get_int64().get(n) != simdjson::SUCCESS || n <= 0) return std::nullopt;
  return n;
}

// "cbatch-<line>", the id result_format gives OpenAI lines.
std::optional<int64_t> batch_id_line(simdjson::dom::element v) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS || !s.starts_with("cbatch-")) return std::nullopt;
  int64_t n = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data() + 7, end, n);
  if (ec != std::errc() || ptr != end || n <= 0) return std::nullopt;
  return n;
}

std::optional<OutputKey> openai_key(simdjson::dom::object obj, simdjson::dom::element custom_id) {
  std::string_view s;
  if (custom_id.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
  simdjson::dom::element error;
  if (obj.at_key("error").get(error) == simdjson::SUCCESS && !error.is_null()) {
    simdjson::dom::element id;
    if (obj.at_key("id").get(id) != simdjson::SUCCESS) return std::nullopt;
    const auto line = batch_id_line(id);
    return line ? std::optional<OutputKey>({true, "", *line}) : std::nullopt;
  }
  return OutputKey{false, json_quote(s), 0};
}

std::optional<OutputKey> simple_key(simdjson::dom::object obj) {
  simdjson::dom::element v;
  if (obj.at_key("error").get(v) == simdjson::SUCCESS) {
    if (obj.at_key("line").get(v) != simdjson::SUCCESS) return std::nullopt;
    const auto line = positive_int(v);
    return line ? std::optional<OutputKey>({true, "", *line}) : std::nullopt;
  }
  if (obj.at_key("id").get(v) != simdjson::SUCCESS) return std::nullopt;
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) return OutputKey{false, json_quote(s), 0};
  if (v.is_int64() || v.is_uint64()) return OutputKey{false, simdjson::minify(v), 0};
  return std::nullopt;
}

}  // namespace

std::optional<OutputKey> output_line_key(simdjson::dom::object obj) {
  simdjson::dom::element custom_id;
  if (obj.at_key("custom_id").get(custom_id) == simdjson::SUCCESS) return openai_key(obj, custom_id);
  return simple_key(obj);
}

}  // namespace cbatch
