// Fuzz target: arbitrary bytes as a JSONL prompts file, through JsonlReader (small chunks, so lines
// straddle chunk boundaries), RequestParser and the output line formatter. Properties: nothing throws;
// every error message starts with "line N: "; every output line is one line of valid JSON; and
// --resume reads each output line back under the key of its input line (result: id, error: line).
#include <simdjson.h>

#include <variant>

#include "engine/io/jsonl_reader.hpp"
#include "engine/io/request_parser.hpp"
#include "engine/io/result_format.hpp"
#include "engine/io/resume.hpp"
#include "fuzz_support.hpp"

using namespace cbatch;

namespace {

std::string format_line(const ParsedRequest& parsed, Request& request) {
  if (const auto* error = std::get_if<RequestError>(&parsed)) {
    fuzz::require(error->message.starts_with("line " + std::to_string(error->line) + ": "), "message prefix",
                  error->message);
    return format_error_line(*error);
  }
  const auto& input = std::get<RequestInput>(parsed);
  request.line = input.line;
  request.id_json = input.id_json;
  request.custom_id = input.custom_id;
  request.form = input.form;
  RequestResult result;
  result.request = &request;
  result.text = input.prompt.value_or("");  // arbitrary (valid UTF-8) text through the writer
  result.finish_reason = "stop";
  return format_result_line(result, {});
}

void check_line(simdjson::dom::parser& json, const std::string& line) {
  fuzz::require(!line.empty() && line.back() == '\n' && line.find('\n') == line.size() - 1, "one line", line);
  simdjson::dom::element unused;
  fuzz::require(json.parse(line).get(unused) == simdjson::SUCCESS, "valid JSON output", line);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::MemFile input("prompts"), output("output");
  static simdjson::dom::parser json;
  JsonlReader reader(input.write(data, size), 1 + size % 61);
  RequestParser parser;
  JsonlLine line;
  std::string out;
  struct Key {
    bool is_error;
    std::string id_json;
    int64_t line;
  };
  std::vector<Key> keys;
  while (reader.next(line)) {
    const ParsedRequest parsed = parser.parse(line);
    Request request;
    const std::string formatted = format_line(parsed, request);
    check_line(json, formatted);
    out += formatted;
    const auto* error = std::get_if<RequestError>(&parsed);
    keys.push_back(error ? Key{true, "", error->line} : Key{false, request.id_json, 0});
  }
  const ResumeState state = read_resume_state(output.write(reinterpret_cast<const uint8_t*>(out.data()), out.size()));
  fuzz::require(state.num_bad_lines == 0 && state.valid_bytes == state.file_bytes, "resume reads every line");
  for (const Key& key : keys) {
    fuzz::require(key.is_error ? state.has_error_line(key.line) : state.has_result(key.id_json), "resume key",
                  key.id_json);
  }
  return 0;
}
