// JsonlRequestSource: duplicate ids become error lines naming the first line, --resume skips lines by
// result id and by error line while still claiming their ids, and prompts too long for any tokenization
// to fit the context are refused before tokenizing.
#include <doctest/doctest.h>

#include <string>
#include <variant>
#include <vector>

#include "engine/io/jsonl_source.hpp"
#include "engine/io/resume.hpp"
#include "temp_file.hpp"
#include "test_model_fixture.hpp"

using cbatch::test::TempFile;

namespace {

struct Item {
  bool is_error;
  int64_t line;
  std::string id_json;
  std::string message;
};

std::vector<Item> read_all(cbatch::JsonlRequestSource& source) {
  std::vector<Item> items;
  cbatch::SourceItem item;
  while (source.next(item)) {
    if (auto* e = std::get_if<cbatch::RequestError>(&item)) {
      items.push_back({true, e->line, e->id_json, e->message});
    } else {
      const auto& r = std::get<cbatch::Request>(item);
      items.push_back({false, r.line, r.id_json, ""});
    }
  }
  return items;
}

const std::string kInput =
    R"({"id": "a", "prompt": "x"})" "\n"   // 1
    R"({"id": "b", "prompt": "x"})" "\n"   // 2
    R"({"id": "a", "prompt": "y"})" "\n"   // 3: duplicate of line 1
    R"({"prompt": "no id"})" "\n"          // 4: id 4
    R"({"id": 4, "prompt": "x"})" "\n"     // 5: duplicate of line 4's default id
    R"({"id": "c", "max_tokens": -1, "prompt": "x"})" "\n"  // 6: invalid, claims nothing
    R"({"id": "c", "prompt": "x"})" "\n";  // 7

}  // namespace

TEST_CASE("jsonl source: a repeated id is an error line naming the first line; invalid lines claim no id") {
  const cbatch::Model model = cbatch::testing::make_test_model({});
  TempFile input(kInput);
  cbatch::JsonlRequestSource source(input.path(), model, nullptr, {}, 0);
  const std::vector<Item> items = read_all(source);
  REQUIRE(items.size() == 7);
  const bool expect_error[] = {false, false, true, false, true, true, false};
  for (size_t i = 0; i < items.size(); ++i) {
    CAPTURE(i);
    CHECK(items[i].line == static_cast<int64_t>(i + 1));
    CHECK(items[i].is_error == expect_error[i]);
  }
  CHECK(items[2].message == "line 3: duplicate id \"a\" (first used on line 1): every line needs its own id");
  CHECK(items[2].id_json == "\"a\"");
  CHECK(items[4].message.find("duplicate id 4 (first used on line 4)") != std::string::npos);
  CHECK(source.num_duplicates() == 2);
}

TEST_CASE("jsonl source: resume skips finished results and error lines and still claims their ids") {
  const cbatch::Model model = cbatch::testing::make_test_model({});
  TempFile input(kInput);
  TempFile output(R"({"id": "a", "text": "t"})" "\n"
                  R"({"id": "a", "line": 3, "error": {"type": "invalid_request", "message": "dup"}})" "\n"
                  R"({"id": 4, "line": 5, "error": {"type": "invalid_request", "message": "dup"}})" "\n"
                  R"({"id": "c", "text": "t"})" "\n");
  const cbatch::ResumeState state = cbatch::read_resume_state(output.path());
  cbatch::JsonlRequestSource source(input.path(), model, nullptr, {}, 0, &state);
  const std::vector<Item> items = read_all(source);
  REQUIRE(items.size() == 3);
  CHECK((!items[0].is_error && items[0].id_json == "\"b\""));
  CHECK((!items[1].is_error && items[1].line == 4));
  CHECK((items[2].is_error && items[2].line == 6));
  CHECK(source.num_resumed_ok() == 2);      // lines 1 and 7
  CHECK(source.num_resumed_failed() == 2);  // lines 3 and 5
}

TEST_CASE("jsonl source: resume re-detects a duplicate whose first line already has its result") {
  const cbatch::Model model = cbatch::testing::make_test_model({});
  TempFile input(kInput);
  TempFile output(R"({"id": "a", "text": "t"})" "\n");
  const cbatch::ResumeState state = cbatch::read_resume_state(output.path());
  cbatch::JsonlRequestSource source(input.path(), model, nullptr, {}, 0, &state);
  const std::vector<Item> items = read_all(source);
  REQUIRE(items.size() == 6);
  CHECK((items[1].is_error && items[1].line == 3));
  CHECK(source.num_resumed_ok() == 1);
}

TEST_CASE("jsonl source: a prompt longer than any tokenization could fit is refused before tokenizing") {
  const cbatch::Model model = cbatch::testing::make_test_model({});  // context 256, 1 byte per token
  const std::string huge(8 * 256 + 1, 'x');
  const std::string long_enough(300, 'x');
  TempFile input(R"({"id": "huge", "prompt": ")" + huge + "\"}\n" + R"({"id": "long", "prompt": ")" +
                 long_enough + "\"}\n");
  cbatch::JsonlRequestSource source(input.path(), model, nullptr, {}, 0);
  const std::vector<Item> items = read_all(source);
  REQUIRE(items.size() == 2);
  CHECK(items[0].message ==
        "line 1: prompt of 2049 bytes cannot fit the model's context of 256 tokens (with this tokenizer no "
        "text over 2048 bytes can)");
  CHECK(items[1].message.find("prompt of 301 tokens") != std::string::npos);  // tokenized, then refused
}
