// read_resume_state / truncate_torn_tail: ids of complete result lines in both shapes, keyed exactly as
// the parser keys input lines, and the input lines of error lines; a torn last line is left out and
// cut, nothing else is.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/io/request_parser.hpp"
#include "engine/io/result_format.hpp"
#include "engine/io/resume.hpp"
#include "fifo.hpp"
#include "temp_file.hpp"

using cbatch::ResumeState;
using cbatch::test::TempFile;

namespace {

const std::string kGood =
    R"({"id": "q1", "text": "a", "output_token_ids": [1], "finish_reason": "stop"})" "\n"
    R"({"id": 2, "text": "b", "output_token_ids": [1], "finish_reason": "length"})" "\n"
    "\n"
    R"({"id": "q3", "line": 3, "error": {"type": "invalid_request", "message": "m"}})" "\n"
    R"({"id": "cbatch-4", "custom_id": "r4", "response": {"status_code": 200}, "error": null})" "\n";

// The id_json the parser gives an input line, and the one read back from its formatted result.
std::string input_id(const std::string& line) {
  const auto parsed = cbatch::parse_request_line(line, 1, {});
  REQUIRE(std::holds_alternative<cbatch::RequestInput>(parsed));
  return std::get<cbatch::RequestInput>(parsed).id_json;
}

}  // namespace

TEST_CASE("resume: complete lines of both shapes are finished; a file without a torn tail is kept") {
  TempFile file(kGood);
  const ResumeState state = cbatch::read_resume_state(file.path());
  CHECK(state.result_ids.size() == 3);
  CHECK(state.has_result("\"q1\""));
  CHECK(state.has_result("2"));
  CHECK_FALSE(state.has_result("\"q3\""));  // an error line is keyed by its input line
  CHECK(state.error_lines == std::vector<int64_t>{3});
  CHECK(state.has_error_line(3));
  CHECK(state.has_result("\"r4\""));
  CHECK_FALSE(state.has_result("\"cbatch-4\""));  // OpenAI lines are keyed by custom_id
  CHECK(state.num_bad_lines == 0);
  CHECK(state.file_bytes == static_cast<int64_t>(kGood.size()));
  CHECK(state.valid_bytes == state.file_bytes);
  cbatch::truncate_torn_tail(file.path(), state);
  CHECK(file.read() == kGood);
}

TEST_CASE("resume: a last line without its newline is torn, left out and cut") {
  const std::string torn = R"({"id": "q5", "text": "complete json but no newline"})";
  TempFile file(kGood + torn);
  const ResumeState state = cbatch::read_resume_state(file.path());
  CHECK_FALSE(state.has_result("\"q5\""));
  CHECK(state.result_ids.size() == 3);
  CHECK(state.valid_bytes == static_cast<int64_t>(kGood.size()));
  CHECK(state.file_bytes == static_cast<int64_t>(kGood.size() + torn.size()));
  CHECK(state.num_bad_lines == 0);
  cbatch::truncate_torn_tail(file.path(), state);
  CHECK(file.read() == kGood);
}

TEST_CASE("resume: a last line that does not parse is torn too") {
  TempFile file(kGood + "{\"id\": \"q6\", \"text\": \"cut her\n");
  const ResumeState state = cbatch::read_resume_state(file.path());
  CHECK(state.result_ids.size() == 3);
  CHECK(state.valid_bytes == static_cast<int64_t>(kGood.size()));
  CHECK(state.num_bad_lines == 0);
}

TEST_CASE("resume: a bad line in the middle is counted, never cut") {
  const std::string content = "not json\n" + kGood;
  TempFile file(content);
  const ResumeState state = cbatch::read_resume_state(file.path());
  CHECK(state.result_ids.size() == 3);
  CHECK(state.num_bad_lines == 1);
  CHECK(state.valid_bytes == static_cast<int64_t>(content.size()));
}

TEST_CASE("resume: a missing file is an empty state; a directory is an error") {
  const ResumeState state = cbatch::read_resume_state("/nonexistent-dir-cbatch/out.jsonl");
  CHECK(state.result_ids.size() == 0);
  CHECK(state.error_lines.empty());
  CHECK(state.valid_bytes == 0);
  CHECK(state.file_bytes == 0);
  CHECK_THROWS_AS(cbatch::read_resume_state(std::filesystem::temp_directory_path().string()),
                  cbatch::Error);
}

TEST_CASE("resume: ids round-trip from input line through output line") {
  const std::string lines[] = {
      R"({"id": "q\u0031", "prompt": "x"})",
      R"({"id": "tab\there \"quoted\" é", "prompt": "x"})",
      R"({"id": 12345678901234, "prompt": "x"})",
      R"({"custom_id": "r\\1", "method": "POST", "url": "/v1/chat/completions",
          "body": {"messages": [{"role": "user", "content": "x"}]}})",
  };
  std::string output;
  std::vector<cbatch::Request> requests;
  requests.reserve(4);
  for (const std::string& line : lines) {
    const auto parsed = cbatch::parse_request_line(line, 1, {});
    REQUIRE(std::holds_alternative<cbatch::RequestInput>(parsed));
    const auto& in = std::get<cbatch::RequestInput>(parsed);
    cbatch::Request& request = requests.emplace_back();
    request.id_json = in.id_json;
    request.custom_id = in.custom_id;
    request.form = in.form;
    cbatch::RequestResult result;
    result.request = &request;
    result.finish_reason = "stop";
    output += cbatch::format_result_line(result);
  }
  TempFile file(output);
  const ResumeState state = cbatch::read_resume_state(file.path());
  CHECK(state.result_ids.size() == 4);
  for (const std::string& line : lines) {
    CAPTURE(line);
    CHECK(state.has_result(input_id(line)));
  }
}

TEST_CASE("resume: error lines of both shapes, as the formatter writes them, key their input line") {
  const std::string lines[] = {R"({"id": "a", "max_tokens": -1, "prompt": "x"})", "{torn json",
                               R"({"custom_id": "c", "method": "GET", "url": "/v1/completions", "body": {}})"};
  std::string output;
  for (int i = 0; i < 3; ++i) {
    const auto parsed = cbatch::parse_request_line(lines[i], 7 * (i + 1), {});
    REQUIRE(std::holds_alternative<cbatch::RequestError>(parsed));
    output += cbatch::format_error_line(std::get<cbatch::RequestError>(parsed));
  }
  TempFile file(output);
  const ResumeState state = cbatch::read_resume_state(file.path());
  CHECK(state.error_lines == std::vector<int64_t>{7, 14, 21});
  CHECK(state.result_ids.size() == 0);
  CHECK(state.num_bad_lines == 0);
}

TEST_CASE("resume: error lines without a usable line number are not cbatch lines") {
  TempFile file(R"({"id": "a", "error": {"message": "m"}})" "\n"
                R"({"id": "a", "line": 0, "error": {"message": "m"}})" "\n"
                R"({"id": "x-3", "custom_id": "c", "error": {"code": "e"}})" "\n"
                R"({"id": "cbatch-4", "custom_id": "c", "error": {"code": "e"}})" "\n");
  const ResumeState state = cbatch::read_resume_state(file.path());
  CHECK(state.error_lines == std::vector<int64_t>{4});
  CHECK(state.num_bad_lines == 3);
}

namespace {

std::string resume_error(const std::string& path) {
  try {
    cbatch::read_resume_state(path);
  } catch (const cbatch::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("resume: an output that is not a regular file is refused at once, naming it") {
  // /dev/zero is one endless line and a pipe's bytes go to the first reader: neither can be read back.
  std::string message;
  CHECK_MESSAGE(cbatch::test::finishes_within(5, [&] { message = resume_error("/dev/zero"); }, [] {}),
                "reading /dev/zero back did not end");
  CHECK(message.find("'/dev/zero' is a character device, not a regular file") != std::string::npos);
  const cbatch::test::TempFifo fifo;
  message.clear();
  CHECK_MESSAGE(cbatch::test::finishes_within(5, [&] { message = resume_error(fifo.path()); },
                                              [&] { fifo.release_readers(); }),
                "reading a named pipe back waited for a writer");
  CHECK(message.find("'" + fifo.path() + "' is a named pipe (FIFO), not a regular file") != std::string::npos);
  CHECK(message.find("--resume") != std::string::npos);
}

TEST_CASE("resume: a stop flag ends the read; the partial state is marked and nothing is cut") {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += R"({"id": "r)" + std::to_string(i) + R"(", "text": "t", "finish_reason": "stop"})" "\n";
  const std::string torn = R"({"id": "torn)";
  TempFile file(text + torn);
  const std::atomic<int> stop{15};
  const ResumeState state = cbatch::read_resume_state(file.path(), &stop);
  CHECK(state.stopped);
  CHECK(state.result_ids.size() < 20000);
  cbatch::truncate_torn_tail(file.path(), state);
  CHECK(file.read() == text + torn);  // the torn tail of an unfinished read is not cut
  const ResumeState whole = cbatch::read_resume_state(file.path());
  CHECK_FALSE(whole.stopped);
  CHECK(whole.result_ids.size() == 20000);
  CHECK(whole.valid_bytes == static_cast<int64_t>(text.size()));
}
