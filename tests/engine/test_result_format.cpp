// Output lines: the exact simple shape of docs/formats.md, error lines, and the OpenAI batch shapes checked
// by parsing them back with simdjson; text ending inside a UTF-8 character still gives valid JSON.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <string>

#include "engine/io/request_parser.hpp"
#include "engine/io/result_format.hpp"

using cbatch::Request;
using cbatch::RequestError;
using cbatch::RequestForm;
using cbatch::RequestResult;

namespace {

Request make_request(std::string id_json, RequestForm form = RequestForm::kSimple,
                     std::string custom_id = "") {
  Request r;
  r.line = 4;
  r.id_json = std::move(id_json);
  r.form = form;
  r.custom_id = std::move(custom_id);
  return r;
}

RequestResult make_result(const Request& request) {
  RequestResult r;
  r.request = &request;
  r.text = " a quiet city";
  r.output_token_ids = {5, 6, 2};
  r.finish_reason = "stop";
  r.prompt_tokens = 5;
  r.completion_tokens = 3;
  r.ttft_ms = 12.5;
  r.e2e_ms = 310.2004;
  r.first_step = 3;
  r.finish_step = 67;
  return r;
}

cbatch::ResultFormatOptions openai_options() {
  cbatch::ResultFormatOptions options;
  options.model = "tiny-llama";
  options.created_s = 1700000000;
  return options;
}

// Parses an output line (which must end in exactly one "\n") into `doc`.
simdjson::dom::element parse_line(simdjson::dom::parser& parser, const std::string& line) {
  REQUIRE(line.size() >= 2);
  CHECK(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  simdjson::dom::element doc;
  REQUIRE(parser.parse(line).get(doc) == simdjson::SUCCESS);
  return doc;
}

std::string str(simdjson::dom::element e) { return std::string(std::string_view(e)); }

}  // namespace

TEST_CASE("result format: simple form, exact docs/formats.md shape") {
  const Request request = make_request("\"q1\"");
  CHECK(cbatch::format_result_line(make_result(request)) ==
        R"({"id": "q1", "text": " a quiet city", "output_token_ids": [5, 6, 2], "finish_reason": "stop", )"
        R"("prompt_tokens": 5, "completion_tokens": 3, "cached_tokens": 0, )"
        R"("metrics": {"ttft_ms": 12.5, "e2e_ms": 310.2, "first_step": 3, "finish_step": 67}})"
        "\n");
}

TEST_CASE("result format: a number id is echoed as a number") {
  const Request request = make_request("17");
  CHECK(cbatch::format_result_line(make_result(request)).starts_with("{\"id\": 17, \"text\""));
}

TEST_CASE("result format: text cut inside a character and control characters stay valid JSON") {
  const Request request = make_request("\"q\"");
  RequestResult result = make_result(request);
  result.text = "line\n\"quoted\" \xE2\x82";  // ends with 2 of the 3 bytes of a euro sign
  simdjson::dom::parser parser;
  const auto doc = parse_line(parser, cbatch::format_result_line(result));
  CHECK(str(doc["text"]) == "line\n\"quoted\" \xEF\xBF\xBD");
}

TEST_CASE("result format: error line") {
  RequestError error;
  error.line = 7;
  error.id_json = "\"q7\"";
  error.message = "line 7: field 'max_tokens' must be a non-negative integer (got -3)";
  CHECK(cbatch::format_error_line(error) ==
        R"({"id": "q7", "line": 7, "error": {"type": "invalid_request", )"
        R"j("message": "line 7: field 'max_tokens' must be a non-negative integer (got -3)"}})j"
        "\n");
}

TEST_CASE("result format: OpenAI completion") {
  const Request request = make_request("\"r1\"", RequestForm::kOpenAICompletions, "r1");
  simdjson::dom::parser parser;
  const auto doc = parse_line(parser, cbatch::format_result_line(make_result(request), openai_options()));
  CHECK(str(doc["id"]) == "cbatch-4");
  CHECK(str(doc["custom_id"]) == "r1");
  CHECK(doc["error"].is_null());
  const auto response = doc["response"];
  CHECK(int64_t(response["status_code"]) == 200);
  CHECK(str(response["request_id"]) == "cbatch-4");
  const auto body = response["body"];
  CHECK(str(body["object"]) == "text_completion");
  CHECK(str(body["model"]) == "tiny-llama");
  CHECK(int64_t(body["created"]) == 1700000000);
  const auto choice = body["choices"].at(0);
  CHECK(int64_t(choice["index"]) == 0);
  CHECK(str(choice["text"]) == " a quiet city");
  CHECK(str(choice["finish_reason"]) == "stop");
  CHECK(int64_t(body["usage"]["prompt_tokens"]) == 5);
  CHECK(int64_t(body["usage"]["completion_tokens"]) == 3);
  CHECK(int64_t(body["usage"]["total_tokens"]) == 8);
}

TEST_CASE("result format: OpenAI chat completion") {
  const Request request = make_request("\"c\\\"1\"", RequestForm::kOpenAIChat, "c\"1");
  simdjson::dom::parser parser;
  const auto doc = parse_line(parser, cbatch::format_result_line(make_result(request), openai_options()));
  CHECK(str(doc["custom_id"]) == "c\"1");
  const auto body = doc["response"]["body"];
  CHECK(str(body["object"]) == "chat.completion");
  const auto message = body["choices"].at(0)["message"];
  CHECK(str(message["role"]) == "assistant");
  CHECK(str(message["content"]) == " a quiet city");
}

TEST_CASE("result format: OpenAI error, straight from the parser") {
  const auto parsed = cbatch::parse_request_line(
      R"({"custom_id": "r9", "method": "POST", "url": "/v1/moderations", "body": {}})", 9, {});
  REQUIRE(std::holds_alternative<RequestError>(parsed));
  simdjson::dom::parser parser;
  const auto doc = parse_line(parser, cbatch::format_error_line(std::get<RequestError>(parsed)));
  CHECK(str(doc["id"]) == "cbatch-9");
  CHECK(str(doc["custom_id"]) == "r9");
  CHECK(int64_t(doc["response"]["status_code"]) == 400);
  CHECK(doc["response"]["body"].is_null());
  CHECK(str(doc["error"]["code"]) == "invalid_request");
  CHECK(str(doc["error"]["message"]).starts_with("line 9: field 'url'"));
}

TEST_CASE("result format: an error without a readable custom_id uses the simple shape") {
  const auto parsed = cbatch::parse_request_line(R"({"custom_id": 3, "url": "/v1/completions"})", 2, {});
  REQUIRE(std::holds_alternative<RequestError>(parsed));
  const std::string line = cbatch::format_error_line(std::get<RequestError>(parsed));
  CHECK(line.starts_with("{\"id\": 2, \"line\": 2, \"error\": {"));
}
