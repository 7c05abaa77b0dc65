// Turns one JSONL input line into a RequestInput (simple or OpenAI batch form) or a RequestError whose
// message starts with "line N: " and names the bad field and its value. The line is parsed with
// simdjson's DOM parser in place (it needs the padding JsonlLine carries), which validates the whole
// line, UTF-8 included, before any field is read. Field rules: docs/formats.md "Input lines", docs/input-format.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <variant>

#include "engine/io/jsonl_reader.hpp"
#include "engine/base/request.hpp"

namespace cbatch {

using ParsedRequest = std::variant<RequestInput, RequestError>;

// Holds the simdjson parser (and its buffers) across lines; one per reading thread.
class RequestParser {
 public:
  explicit RequestParser(const RequestDefaults& defaults = {});
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses line.text() in place, using the zero padding that follows it in line.buffer.
  ParsedRequest parse(const JsonlLine& line);
  // Copies `text` into a padded buffer first.
  ParsedRequest parse(std::string_view text, int64_t line_no);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-off convenience (builds a parser per call); prefer RequestParser for a file.
ParsedRequest parse_request_line(std::string_view text, int64_t line_no,
                                 const RequestDefaults& defaults);

}  // namespace cbatch
