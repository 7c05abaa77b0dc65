// parse_request_line / RequestParser: both id types, the three simple prompt kinds, the OpenAI batch
// forms, every sampling field's type and range checks (exact messages with line number and field),
// invalid JSON and invalid UTF-8, and parsing a JsonlLine in place.
#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "engine/io/jsonl_reader.hpp"
#include "engine/io/request_parser.hpp"
#include "temp_file.hpp"

using cbatch::ParsedRequest;
using cbatch::RequestDefaults;
using cbatch::RequestError;
using cbatch::RequestForm;
using cbatch::RequestInput;

namespace {

RequestInput parse_ok(std::string_view line, int64_t line_no = 1, RequestDefaults defaults = {}) {
  ParsedRequest r = cbatch::parse_request_line(line, line_no, defaults);
  if (auto* err = std::get_if<RequestError>(&r)) FAIL("unexpected error: " << err->message);
  return std::get<RequestInput>(std::move(r));
}

RequestError parse_bad(std::string_view line, int64_t line_no = 12) {
  ParsedRequest r = cbatch::parse_request_line(line, line_no, RequestDefaults{});
  REQUIRE_MESSAGE(std::holds_alternative<RequestError>(r), "accepted: " << line);
  return std::get<RequestError>(std::move(r));
}

struct ErrorCase {
  std::string line;
  std::string message;
};

}  // namespace

TEST_CASE("request parser: simple form with a string id and sampling fields") {
  const RequestInput in = parse_ok(
      R"({"id": "q1", "prompt": "I dreamed of", "max_tokens": 64, "temperature": 0, "top_p": 0.9,
          "top_k": 40, "min_p": 0.05, "seed": 7, "stop": ["\n", "END"], "stop_token_ids": [2, 13],
          "ignore_eos": true, "repetition_penalty": 1.1, "presence_penalty": -0.5,
          "frequency_penalty": 2, "unknown_field": {"x": [1]}})",
      3);
  CHECK(in.line == 3);
  CHECK(in.id_json == "\"q1\"");
  CHECK(in.form == RequestForm::kSimple);
  CHECK(in.prompt == "I dreamed of");
  CHECK_FALSE(in.prompt_token_ids.has_value());
  CHECK_FALSE(in.messages.has_value());
  const auto& s = in.sampling;
  CHECK(s.max_tokens == 64);
  CHECK(s.temperature == 0.0f);
  CHECK(s.top_p == doctest::Approx(0.9));
  CHECK(s.top_k == 40);
  CHECK(s.min_p == doctest::Approx(0.05));
  CHECK(s.seed == 7u);
  CHECK(s.stop == std::vector<std::string>{"\n", "END"});
  CHECK(s.stop_token_ids == std::vector<int32_t>{2, 13});
  CHECK(s.ignore_eos);
  CHECK(s.repetition_penalty == doctest::Approx(1.1));
  CHECK(s.presence_penalty == doctest::Approx(-0.5));
  CHECK(s.frequency_penalty == doctest::Approx(2.0));
}

TEST_CASE("request parser: defaults, and null counts as absent") {
  RequestDefaults defaults;
  defaults.max_tokens = 33;
  const RequestInput in = parse_ok(R"({"prompt": "", "stop": null, "seed": null})", 5, defaults);
  CHECK(in.id_json == "5");  // no id: the line number, as a JSON number
  CHECK(in.prompt == "");    // an empty prompt is allowed
  CHECK(in.sampling.max_tokens == 33);
  CHECK(in.sampling.temperature == 1.0f);
  CHECK(in.sampling.top_k == -1);
  CHECK(in.sampling.stop.empty());
  CHECK_FALSE(in.sampling.seed.has_value());
}

TEST_CASE("request parser: ids") {
  CHECK(parse_ok(R"({"id": 42, "prompt": "x"})").id_json == "42");
  CHECK(parse_ok(R"({"id": -3, "prompt": "x"})").id_json == "-3");
  CHECK(parse_ok(R"({"id": 18446744073709551615, "prompt": "x"})").id_json == "18446744073709551615");
  // String ids are stored in canonical escaped form, so equal strings give equal id_json.
  CHECK(parse_ok(R"({"id": "q\u0031", "prompt": "x"})").id_json == "\"q1\"");
  CHECK(parse_ok(R"({"id": "a\"b\/c", "prompt": "x"})").id_json == R"("a\"b/c")");
  CHECK(parse_ok(R"({"id": "é", "prompt": "x"})").id_json == "\"é\"");
  CHECK(parse_bad(R"({"id": 1.5, "prompt": "x"})").message ==
        "line 12: field 'id' must be a string or an integer (got 1.5)");
  CHECK(parse_bad(R"({"id": ["a"], "prompt": "x"})").message ==
        "line 12: field 'id' must be a string or an integer (got [\"a\"])");
}

TEST_CASE("request parser: prompt_token_ids and messages") {
  const RequestInput ids = parse_ok(R"({"id": "q2", "prompt_token_ids": [1, 72, 301], "max_tokens": 16})");
  CHECK(ids.prompt_token_ids == std::vector<int32_t>{1, 72, 301});
  CHECK_FALSE(ids.prompt.has_value());

  const RequestInput chat = parse_ok(
      R"({"id": "q3", "messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Name"}, {"type": "text", "text": "colors."}]}]})");
  REQUIRE(chat.messages.has_value());
  REQUIRE(chat.messages->size() == 2);
  CHECK((*chat.messages)[0].role == "system");
  CHECK((*chat.messages)[0].content == "Be brief.");
  CHECK((*chat.messages)[1].role == "user");
  CHECK((*chat.messages)[1].content == "Name\ncolors.");
}

TEST_CASE("request parser: prompt errors") {
  const ErrorCase cases[] = {
      {R"({"id": "q"})", "line 12: no prompt: give one of 'prompt', 'prompt_token_ids' or 'messages'"},
      {R"({"prompt": null})", "line 12: no prompt: give one of 'prompt', 'prompt_token_ids' or 'messages'"},
      {R"({"prompt": "a", "messages": []})",
       "line 12: more than one prompt: give only one of 'prompt', 'prompt_token_ids' or 'messages'"},
      {R"({"prompt": 5})", "line 12: field 'prompt' must be a string (got 5)"},
      {R"({"prompt": [1, 2]})", "line 12: field 'prompt' must be a string (got [1,2])"},
      {R"({"prompt_token_ids": []})",
       "line 12: field 'prompt_token_ids' must be a non-empty list of token ids (got [])"},
      {R"({"prompt_token_ids": "1 2"})",
       "line 12: field 'prompt_token_ids' must be a list of non-negative integers (got \"1 2\")"},
      {R"({"prompt_token_ids": [1, -2]})",
       "line 12: field 'prompt_token_ids[1]' must be a non-negative integer (a token id) (got -2)"},
      {R"({"prompt_token_ids": [1, 2147483648]})",
       "line 12: field 'prompt_token_ids[1]' must be a non-negative integer (a token id) (got 2147483648)"},
      {R"({"prompt_token_ids": [1.0]})",
       "line 12: field 'prompt_token_ids[0]' must be a non-negative integer (a token id) (got 1.0)"},
      {R"({"messages": []})",
       "line 12: field 'messages' must be a non-empty list of {\"role\", \"content\"} objects (got [])"},
      {R"({"messages": ["hi"]})",
       "line 12: field 'messages[0]' must be an object with \"role\" and \"content\" (got \"hi\")"},
      {R"({"messages": [{"role": "user"}]})",
       "line 12: field 'messages[0]' must be an object with \"role\" and \"content\" (got {\"role\":\"user\"})"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": 1, "content": "b"}]})",
       "line 12: field 'messages[1].role' must be a string (got 1)"},
      {R"({"messages": [{"role": "user", "content": 7}]})",
       "line 12: field 'messages[0].content' must be a string or a list of text parts (got 7)"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "line 12: field 'messages[0].content[0]' must be a text part {\"type\": \"text\", \"text\": \"...\"} "
       "(got {\"type\":\"image_url\"})"},
  };
  for (const ErrorCase& c : cases) {
    CAPTURE(c.line);
    CHECK(parse_bad(c.line).message == c.message);
  }
}

TEST_CASE("request parser: too many prompt token ids") {
  std::string line = "{\"prompt_token_ids\": [";
  line.reserve(20'000'100);
  for (size_t i = 0; i <= cbatch::kMaxPromptTokenIds; ++i) line += i == 0 ? "0" : ",0";
  line += "]}";
  CHECK(parse_bad(line).message ==
        "line 12: field 'prompt_token_ids' must have at most 10000000 ids (got 10000001)");
}

TEST_CASE("request parser: sampling field type and range errors name the field and value") {
  const ErrorCase cases[] = {
      {R"({"prompt": "x", "max_tokens": -3})",
       "line 12: field 'max_tokens' must be a non-negative integer (got -3)"},
      {R"({"prompt": "x", "max_tokens": "64"})",
       "line 12: field 'max_tokens' must be a non-negative integer (got \"64\")"},
      {R"({"prompt": "x", "max_tokens": 6.5})",
       "line 12: field 'max_tokens' must be a non-negative integer (got 6.5)"},
      {R"({"prompt": "x", "max_tokens": 1000001})",
       "line 12: field 'max_tokens' must be at most 1000000 (got 1000001)"},
      {R"({"prompt": "x", "max_completion_tokens": -1})",
       "line 12: field 'max_completion_tokens' must be a non-negative integer (got -1)"},
      {R"({"prompt": "x", "temperature": -0.5})",
       "line 12: field 'temperature' must be a number >= 0 (got -0.5)"},
      {R"({"prompt": "x", "temperature": "hot"})",
       "line 12: field 'temperature' must be a number >= 0 (got \"hot\")"},
      {R"({"prompt": "x", "temperature": 1e300})",
       "line 12: field 'temperature' must be a number >= 0 (got 1e+300)"},
      {R"({"prompt": "x", "top_p": 0})", "line 12: field 'top_p' must be a number in (0, 1] (got 0)"},
      {R"({"prompt": "x", "top_p": 1.5})", "line 12: field 'top_p' must be a number in (0, 1] (got 1.5)"},
      {R"({"prompt": "x", "top_k": -2})",
       "line 12: field 'top_k' must be an integer >= 1, or -1 or 0 for no limit (got -2)"},
      {R"({"prompt": "x", "top_k": 2.5})",
       "line 12: field 'top_k' must be an integer >= 1, or -1 or 0 for no limit (got 2.5)"},
      {R"({"prompt": "x", "min_p": 1.1})", "line 12: field 'min_p' must be a number in [0, 1] (got 1.1)"},
      {R"({"prompt": "x", "seed": -1})", "line 12: field 'seed' must be a non-negative integer (got -1)"},
      {R"({"prompt": "x", "seed": "7"})", "line 12: field 'seed' must be a non-negative integer (got \"7\")"},
      {R"({"prompt": "x", "stop": 5})", "line 12: field 'stop' must be a string or a list of strings (got 5)"},
      {R"({"prompt": "x", "stop": ["a", 1]})",
       "line 12: field 'stop' must be a string or a list of strings (got [\"a\",1])"},
      {R"({"prompt": "x", "stop": ["a", ""]})",
       "line 12: field 'stop' must be a non-empty string or a list of non-empty strings (got [\"a\",\"\"])"},
      {R"({"prompt": "x", "stop_token_ids": [-1]})",
       "line 12: field 'stop_token_ids[0]' must be a non-negative integer (a token id) (got -1)"},
      {R"({"prompt": "x", "stop_token_ids": 2})",
       "line 12: field 'stop_token_ids' must be a list of non-negative integers (got 2)"},
      {R"({"prompt": "x", "ignore_eos": "yes"})",
       "line 12: field 'ignore_eos' must be true or false (got \"yes\")"},
      {R"({"prompt": "x", "repetition_penalty": 0})",
       "line 12: field 'repetition_penalty' must be a number > 0 (got 0)"},
      {R"({"prompt": "x", "presence_penalty": 2.5})",
       "line 12: field 'presence_penalty' must be a number in [-2, 2] (got 2.5)"},
      {R"({"prompt": "x", "frequency_penalty": -3})",
       "line 12: field 'frequency_penalty' must be a number in [-2, 2] (got -3)"},
      {R"({"prompt": "x", "top_k": 3000000000})",
       "line 12: field 'top_k' must be an integer >= 1, or -1 or 0 for no limit, at most 2147483647 (got 3000000000)"},
      {R"({"prompt": "x", "logit_bias": [1, 2]})",
       "line 12: field 'logit_bias' must be an object of token ids (as strings) to biases in [-100, 100] (got [1,2])"},
      {R"({"prompt": "x", "logit_bias": {"7": 100.5}})",
       "line 12: field 'logit_bias[\"7\"]' must be a number in [-100, 100] (got 100.5)"},
      {R"({"prompt": "x", "logit_bias": {"7": "up"}})",
       "line 12: field 'logit_bias[\"7\"]' must be a number in [-100, 100] (got \"up\")"},
      {R"({"prompt": "x", "logit_bias": {"the": 1}})",
       "line 12: field 'logit_bias' has the key \"the\": its keys must be token ids, non-negative integers written "
       "as strings"},
      {R"({"prompt": "x", "logit_bias": {"-4": 1}})",
       "line 12: field 'logit_bias' has the key \"-4\": its keys must be token ids, non-negative integers written "
       "as strings"},
      {R"({"prompt": "x", "logit_bias": {"99999999999": 1}})",
       "line 12: field 'logit_bias' has the key \"99999999999\": its keys must be token ids, non-negative integers "
       "written as strings"},
      {R"({"prompt": "x", "logit_bias": {"5": 1, "05": 2}})", "line 12: field 'logit_bias' names token 5 twice"},
      {R"({"prompt": "x", "best_of": 2, "n": 2})",
       "line 12: field 'best_of' is not supported (got 2): as in vLLM V1, every sample is returned; ask for them with "
       "'n'"},
      {R"({"prompt": "x", "best_of": "1"})",
       "line 12: field 'best_of' is not supported (got \"1\"): as in vLLM V1, every sample is returned; ask for them "
       "with 'n'"},
  };
  for (const ErrorCase& c : cases) {
    CAPTURE(c.line);
    const RequestError err = parse_bad(c.line);
    CHECK(err.message == c.message);
    CHECK(err.line == 12);
    CHECK(err.type == "invalid_request");
  }
}

TEST_CASE("request parser: logit_bias is read sorted by token id; best_of 1 is the no-op it is") {
  const RequestInput in = parse_ok(R"({"prompt": "x", "logit_bias": {"30": -100, "2": 100, "7": 0.5}, "best_of": 1})");
  const std::vector<std::pair<int32_t, float>> expected = {{2, 100.0f}, {7, 0.5f}, {30, -100.0f}};
  CHECK(in.sampling.logit_bias == expected);
  CHECK(parse_ok(R"({"prompt": "x", "logit_bias": {}})").sampling.logit_bias.empty());
  CHECK(parse_ok(R"({"prompt": "x", "logit_bias": null, "best_of": null})").sampling.logit_bias.empty());
}

TEST_CASE("request parser: a number simdjson cannot read names its field") {
  CHECK(parse_bad(R"({"prompt": "x", "seed": 18446744073709551616})").message ==
        "line 12: invalid JSON: field 'seed' holds the number 18446744073709551616, which is out of range: integers "
        "must lie in [-2^63, 2^64 - 1], other numbers within +-1.8e308");
  CHECK(parse_bad(R"({"custom_id": "c", "method": "POST", "url": "/v1/completions",
                      "body": {"prompt": [1, 2, -99999999999999999999]}})").message.starts_with(
        "line 12: invalid JSON: field 'body.prompt[2]' holds the number -99999999999999999999, which is out of range"));
  CHECK(parse_bad(R"({"prompt": "x", "temperature": 1e999})").message.starts_with(
        "line 12: invalid JSON: field 'temperature' holds the number 1e999"));
  CHECK(parse_bad(R"({"prompt": "x\"y", "stop": ["a", {"k": [0, 012]}]})").message ==
        "line 12: invalid JSON: field 'stop[1].k[1]' holds 012, which is not a JSON number");
  CHECK(parse_bad(R"({"prompt": "x", "temperature": -})").message ==
        "line 12: invalid JSON: field 'temperature' holds -, which is not a JSON number");
  // The largest integers simdjson reads are not flagged (boundary values are accepted below).
  CHECK(parse_ok(R"({"prompt": "x", "seed": 18446744073709551615, "x": -9223372036854775808})").sampling.seed ==
        18446744073709551615ull);
}

TEST_CASE("request parser: a line that would run more sequences than a line may is refused") {
  std::string prompts;
  for (int i = 0; i < 101; ++i) prompts += std::string(i ? ", " : "") + "\"p\"";
  CHECK(parse_bad(R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": [)" + prompts +
                  R"(], "n": 1000}})").message ==
        "line 12: the line asks for 101000 sequences (101 prompts x n = 1000), more than the 100000 one line may run; "
        "split it into several lines");
  std::string inputs;
  for (int i = 0; i < 100001; ++i) inputs += std::string(i ? "," : "") + "[1]";
  CHECK(parse_bad(R"({"custom_id": "c", "method": "POST", "url": "/v1/embeddings", "body": {"input": [)" + inputs +
                  "]}}").message.starts_with("line 12: the line asks for 100001 sequences (100001 inputs)"));
  prompts.clear();
  for (int i = 0; i < 100; ++i) prompts += std::string(i ? ", " : "") + "\"p\"";
  CHECK(parse_ok(R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": [)" + prompts +
                 R"(], "n": 1000}})").prompt_list.size() == 100);
}

TEST_CASE("request parser: boundary values are accepted") {
  const RequestInput in = parse_ok(
      R"({"prompt": "x", "max_tokens": 1000000, "top_p": 1, "top_k": 0, "min_p": 1,
          "seed": 18446744073709551615, "stop": "s", "repetition_penalty": 0.01,
          "presence_penalty": -2, "frequency_penalty": 2, "temperature": 0})");
  CHECK(in.sampling.max_tokens == 1000000);
  CHECK(in.sampling.top_k == 0);
  CHECK(in.sampling.seed == 18446744073709551615ull);
  CHECK(in.sampling.stop == std::vector<std::string>{"s"});
  CHECK(parse_ok(R"({"prompt": "x", "max_tokens": 0})").sampling.max_tokens == 0);
}

TEST_CASE("request parser: an error carries the id, even one that comes after the bad field") {
  const RequestError before = parse_bad(R"({"id": "q9", "prompt": "x", "max_tokens": -3})", 7);
  CHECK(before.id_json == "\"q9\"");
  CHECK(before.line == 7);
  CHECK(before.message == "line 7: field 'max_tokens' must be a non-negative integer (got -3)");
  const RequestError after = parse_bad(R"({"max_tokens": -3, "prompt": "x", "id": 55})", 8);
  CHECK(after.id_json == "55");
  CHECK(parse_bad(R"({"id": 1.5, "prompt": "x"})", 9).id_json == "9");
}

TEST_CASE("request parser: long values are cut in messages") {
  const std::string line = "{\"prompt\": \"x\", \"stop\": [\"" + std::string(200, 'z') + "\", \"\"]}";
  const std::string msg = parse_bad(line).message;
  CHECK(msg.size() < 200);
  CHECK(msg.find("... (207 bytes))") != std::string::npos);
}

TEST_CASE("request parser: invalid JSON, non-objects and invalid UTF-8") {
  const RequestError json = parse_bad(R"({"id": "q1", "prompt": "x",})", 4);
  CHECK(json.message.starts_with("line 4: invalid JSON: "));
  CHECK(json.message.size() > std::string("line 4: invalid JSON: ").size());
  CHECK(json.id_json == "4");
  CHECK(parse_bad(R"({"prompt": "x"} {"prompt": "y"})").message.starts_with("line 12: invalid JSON: "));
  CHECK(parse_bad(R"({"prompt": "x")").message.starts_with("line 12: invalid JSON: "));
  CHECK(parse_bad(R"([{"prompt": "x"}])").message ==
        "line 12: the line must be a JSON object (got [{\"prompt\":\"x\"}])");
  CHECK(parse_bad("\"just a string\"").message ==
        "line 12: the line must be a JSON object (got \"just a string\")");
  // Raw invalid bytes inside a string, an overlong encoding, and an escaped lone surrogate.
  CHECK(parse_bad("{\"prompt\": \"ab\xff\"}").message ==
        "line 12: invalid UTF-8: the line must be UTF-8 encoded JSON");
  CHECK(parse_bad("{\"prompt\": \"\xC0\xAF\"}").message.starts_with("line 12: invalid UTF-8"));
  CHECK(parse_bad(R"({"prompt": "x\ud800y"})").message.starts_with("line 12: invalid JSON: "));
  CHECK(parse_ok(R"({"prompt": "\ud83d\ude00 ok"})").prompt == "😀 ok");
}

TEST_CASE("request parser: OpenAI completions form") {
  const RequestInput in = parse_ok(
      R"({"custom_id": "r1", "method": "POST", "url": "/v1/completions",
          "body": {"model": "m", "prompt": "Hello", "max_tokens": 32, "temperature": 0.5}})");
  CHECK(in.form == RequestForm::kOpenAICompletions);
  CHECK(in.custom_id == "r1");
  CHECK(in.id_json == "\"r1\"");
  CHECK(in.prompt == "Hello");
  CHECK(in.sampling.max_tokens == 32);
  CHECK(in.sampling.temperature == 0.5f);

  const RequestInput ids = parse_ok(
      R"({"custom_id": "r2", "method": "POST", "url": "/v1/completions", "body": {"prompt": [1, 2, 3]}})");
  CHECK(ids.prompt_token_ids == std::vector<int32_t>{1, 2, 3});

  const RequestInput list = parse_ok(
      R"({"custom_id": "r3", "method": "POST", "url": "/v1/completions", "body": {"prompt": ["a", [7, 8]]}})");
  REQUIRE(list.prompt_list.size() == 2);
  CHECK_FALSE(list.prompt.has_value());
  CHECK_FALSE(list.prompt_token_ids.has_value());
  CHECK(list.prompt_list[0].text == std::optional<std::string>("a"));
  CHECK(!list.prompt_list[1].text);
  CHECK(list.prompt_list[1].ids == std::vector<int32_t>{7, 8});
}

TEST_CASE("request parser: OpenAI score and rerank forms") {
  const RequestInput score = parse_ok(
      R"({"custom_id": "s", "method": "POST", "url": "/v1/score", "body": {"text_1": "q", "text_2": ["a", "b"]}})");
  CHECK(score.form == RequestForm::kOpenAIScore);
  REQUIRE(score.scoring.has_value());
  CHECK(score.scoring->text_1 == std::vector<std::string>{"q"});
  CHECK(score.scoring->text_2 == std::vector<std::string>{"a", "b"});
  const RequestInput rerank = parse_ok(
      R"({"custom_id": "r", "method": "POST", "url": "/v1/rerank", "body": {"query": "q", "documents": ["a"], "top_n": 1}})");
  CHECK(rerank.form == RequestForm::kOpenAIRerank);
  REQUIRE(rerank.scoring.has_value());
  CHECK(rerank.scoring->text_2 == std::vector<std::string>{"a"});
  CHECK(rerank.scoring->top_n == 1);
}

TEST_CASE("request parser: OpenAI chat form") {
  const RequestInput in = parse_ok(
      R"({"custom_id": "r\"3", "method": "POST", "url": "/v1/chat/completions",
          "body": {"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                   "max_tokens": 5, "max_completion_tokens": 9}})");
  CHECK(in.form == RequestForm::kOpenAIChat);
  CHECK(in.custom_id == "r\"3");
  CHECK(in.id_json == R"("r\"3")");
  REQUIRE(in.messages.has_value());
  CHECK((*in.messages)[0].content == "Hi");
  CHECK(in.sampling.max_tokens == 9);  // max_completion_tokens wins, as in vLLM
}

TEST_CASE("request parser: embedding lines") {
  auto simple = cbatch::parse_request_line(R"({"id": "e", "input": "some text", "truncate_prompt_tokens": 7})", 3, {});
  REQUIRE(std::holds_alternative<RequestInput>(simple));
  const RequestInput& s = std::get<RequestInput>(simple);
  REQUIRE(s.embedding);
  CHECK(s.embedding->texts == std::vector<std::string>{"some text"});
  CHECK(s.embedding->truncate_prompt_tokens == 7);
  CHECK(!s.prompt);
  auto openai = cbatch::parse_request_line(
      R"({"custom_id": "c", "method": "POST", "url": "/v1/embeddings", "body": {"model": "m", "input": [[1, 2], [3]],
          "encoding_format": "base64", "dimensions": 64}})", 4, {});
  REQUIRE(std::holds_alternative<RequestInput>(openai));
  const RequestInput& o = std::get<RequestInput>(openai);
  REQUIRE(o.embedding);
  CHECK(o.form == RequestForm::kOpenAIEmbeddings);
  CHECK(o.embedding->token_ids == std::vector<std::vector<int32_t>>{{1, 2}, {3}});
  CHECK(o.embedding->base64);
  CHECK(o.embedding->dimensions == 64);
}

TEST_CASE("request parser: OpenAI form errors") {
  const std::string head = R"({"custom_id": "r1", "method": "POST", )";
  const ErrorCase cases[] = {
      {R"("url": "/v1/moderations", "body": {"input": "x"}})",
       "line 12: field 'url' must be \"/v1/completions\", \"/v1/chat/completions\", \"/v1/embeddings\", \"/v1/score\" "
       "or \"/v1/rerank\" (got \"/v1/moderations\")"},
      {R"("url": "/v1/rerank", "body": {"query": "q", "documents": []}})",
       "line 12: field 'body.documents' must be a non-empty list of strings (got [])"},
      {R"("url": "/v1/rerank", "body": {"query": "q"}})",
       "line 12: no documents: field 'body.documents' is required"},
      {R"("url": "/v1/score", "body": {"text_1": ["a", "b"], "text_2": ["c"]}})",
       "line 12: 'body.text_1' has 2 texts and 'body.text_2' 1: give one text_1 against any number of text_2, "
       "or lists of equal length"},
      {R"("url": "/v1/score", "body": {"text_1": "a", "text_2": [3]}})",
       "line 12: field 'body.text_2[0]' must be a string (got 3)"},
      {R"("url": "/v1/completions", "body": {"prompt": ["a", 5]}})",
       "line 12: field 'body.prompt[1]' must be a string or a list of token ids (got 5)"},
      {R"("url": "/v1/completions", "body": {"prompt": [[1], "b", []]}})",
       "line 12: field 'body.prompt[2]' must be a non-empty list of token ids (got [])"},
      {R"("url": "/v1/embeddings", "body": {"prompt": "x"}})", "line 12: no input: give 'body.input'"},
      {R"("url": "/v1/embeddings", "body": {"input": []}})",
       "line 12: field 'body.input' must be a non-empty string or list of token ids (got [])"},
      {R"("url": "/v1/embeddings", "body": {"input": ["a", [1]]}})",
       "line 12: field 'body.input' must be a list of strings or a list of token id lists, not both (got [\"a\",[1]])"},
      {R"("url": "/v1/embeddings", "body": {"input": "a", "encoding_format": "int8"}})",
       "line 12: field 'body.encoding_format' must be \"float\" or \"base64\" (got \"int8\")"},
      {R"("url": "/v1/embeddings", "body": {"input": "a", "dimensions": 0}})",
       "line 12: field 'body.dimensions' must be a positive integer (got 0)"},
      {R"("url": "/v1/embeddings", "body": {"input": "a", "dimensions": 2147483648}})",
       "line 12: field 'body.dimensions' must be a positive integer, at most 1048576 (got 2147483648)"},
      {R"("url": "/v1/embeddings", "body": {"input": "a", "truncate_prompt_tokens": 18446744073709551615}})",
       "line 12: field 'body.truncate_prompt_tokens' must be a positive integer, at most 16777216 (got "
       "18446744073709551615)"},
      {R"("url": "/v1/completions", "body": {"prompt": 3}})",
       "line 12: field 'body.prompt' must be a string, a list of token ids or a list of prompts (got 3)"},
      {R"("url": "/v1/completions", "body": {"messages": []}})", "line 12: no prompt: give 'body.prompt'"},
      {R"("url": "/v1/chat/completions", "body": {"prompt": "x"}})",
       "line 12: no prompt: give 'body.messages'"},
      {R"("url": "/v1/completions", "body": {"prompt": "x", "max_tokens": -1}})",
       "line 12: field 'body.max_tokens' must be a non-negative integer (got -1)"},
      {R"("url": "/v1/completions", "body": "x"})", "line 12: field 'body' must be an object (got \"x\")"},
      {R"("url": "/v1/completions"})", "line 12: field 'body' is required in the OpenAI batch form"},
  };
  for (const ErrorCase& c : cases) {
    CAPTURE(c.line);
    const RequestError err = parse_bad(head + c.line);
    CHECK(err.message == c.message);
    CHECK(err.form != RequestForm::kSimple);
    CHECK(err.custom_id == "r1");
    CHECK(err.id_json == "\"r1\"");
  }
  CHECK(parse_bad(R"({"custom_id": "r", "method": "GET", "url": "/v1/completions", "body": {}})").message ==
        "line 12: field 'method' must be \"POST\" (got \"GET\")");
  CHECK(parse_bad(R"({"custom_id": "r", "url": "/v1/completions", "body": {}})").message ==
        "line 12: field 'method' is required in the OpenAI batch form");
}

TEST_CASE("request parser: an OpenAI line without a readable custom_id errors in the simple shape") {
  const RequestError err =
      parse_bad(R"({"custom_id": 5, "method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}})", 3);
  CHECK(err.message == "line 3: field 'custom_id' must be a string (got 5)");
  CHECK(err.form == RequestForm::kSimple);
  CHECK(err.id_json == "3");
  const RequestError missing = parse_bad(R"({"url": "/v1/completions", "body": {"prompt": "x"}})", 4);
  CHECK(missing.message == "line 4: field 'custom_id' is required in the OpenAI batch form");
}

TEST_CASE("request parser: lines from a JsonlReader parse in place, line numbers included") {
  const std::string big = std::string(10'000'000, 'w');
  cbatch::test::TempFile file("\n{\"id\": \"big\", \"prompt\": \"" + big + "\"}\r\n{\"prompt\": 1}\n");
  cbatch::JsonlReader reader(file.path());
  cbatch::RequestParser parser;
  cbatch::JsonlLine line;
  REQUIRE(reader.next(line));
  ParsedRequest first = parser.parse(line);
  REQUIRE(std::holds_alternative<RequestInput>(first));
  CHECK(std::get<RequestInput>(first).line == 2);
  CHECK(std::get<RequestInput>(first).prompt->size() == big.size());
  REQUIRE(reader.next(line));
  ParsedRequest second = parser.parse(line);
  REQUIRE(std::holds_alternative<RequestError>(second));
  CHECK(std::get<RequestError>(second).message == "line 3: field 'prompt' must be a string (got 1)");
}

TEST_CASE("request parser: a torn last line says the file may be truncated; a whole one without newline parses") {
  cbatch::test::TempFile torn("{\"prompt\": \"a\"}\n{\"id\": \"t\", \"prompt\": \"I dre");
  cbatch::JsonlReader reader(torn.path());
  cbatch::RequestParser parser;
  cbatch::JsonlLine line;
  REQUIRE(reader.next(line));
  CHECK(std::holds_alternative<RequestInput>(parser.parse(line)));
  REQUIRE(reader.next(line));
  const ParsedRequest last = parser.parse(line);
  REQUIRE(std::holds_alternative<RequestError>(last));
  CHECK(std::get<RequestError>(last).message.starts_with(
      "line 2: invalid JSON (the last line has no newline: is the file truncated?): "));
  cbatch::test::TempFile whole("{\"prompt\": \"a\"}");
  cbatch::JsonlReader whole_reader(whole.path());
  REQUIRE(whole_reader.next(line));
  CHECK(std::holds_alternative<RequestInput>(parser.parse(line)));
}

TEST_CASE("request parser: a line over the reader's limit is an error naming the limit") {
  cbatch::test::TempFile file(std::string(100, ' ') + "{\"prompt\": \"x\"}\n");
  cbatch::JsonlReader reader(file.path(), 64, 50);
  cbatch::RequestParser parser;
  cbatch::JsonlLine line;
  REQUIRE(reader.next(line));
  const ParsedRequest parsed = parser.parse(line);
  REQUIRE(std::holds_alternative<RequestError>(parsed));
  CHECK(std::get<RequestError>(parsed).message ==
        "line 1: the line is longer than 67108864 bytes (64 MiB), the most a line may have");
}
