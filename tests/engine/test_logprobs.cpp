// Logprobs: the row reduction (log-softmax in double against a direct formula, ties to the lower id,
// -inf logits, k = 0 and k above the vocabulary, NaN ranked last), a host backend's answers to logprob
// queries (chunks of logprob_chunk_rows, sampled rows from the step's logits) equal the row reduction,
// the request fields (k ranges, chat's logprobs/top_logprobs, echo only in completions) and the token
// display of pieces that are not UTF-8 alone.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "tests/engine/step_io.hpp"
#include "engine/backend/logprob_split.hpp"
#include "engine/cpu/logprob_queries.hpp"
#include "engine/io/logprob_format.hpp"
#include "engine/io/request_parser.hpp"
#include "engine/sample/logprobs.hpp"

namespace cbatch::test {
namespace {

std::vector<float> random_row(int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = dist(rng);
  return row;
}

struct Reduced {
  float target = 0;
  std::vector<int32_t> ids;
  std::vector<float> lps;
};

Reduced reduce(const std::vector<float>& row, int k, int32_t target) {
  Reduced r;
  r.ids.assign(static_cast<size_t>(k), -1);
  r.lps.assign(static_cast<size_t>(k), 0.0f);
  r.target = reduce_logprob_row(row.data(), static_cast<int>(row.size()), k, target, r.ids.data(), r.lps.data());
  return r;
}

}  // namespace

TEST_CASE("logprobs: a row's log-softmax and top-k against a direct formula") {
  const std::vector<float> row = random_row(1000, 1);
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x));
  const Reduced r = reduce(row, 7, 123);
  CHECK(r.target == doctest::Approx(row[123] - std::log(sum)).epsilon(1e-6));
  std::vector<int32_t> order(row.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  for (int i = 0; i < 7; ++i) {
    CHECK(r.ids[i] == order[i]);
    CHECK(r.lps[i] == doctest::Approx(row[order[i]] - std::log(sum)).epsilon(1e-6));
  }
}

TEST_CASE("logprobs: ties go to the lower id, -inf logits, k = 0 and k above the vocabulary") {
  const std::vector<float> row = {1.0f, 3.0f, -INFINITY, 3.0f, 2.0f, 3.0f};
  const Reduced r = reduce(row, 10, 2);
  CHECK(r.target == -INFINITY);
  CHECK(r.ids == std::vector<int32_t>{1, 3, 5, 4, 0, 2, -1, -1, -1, -1});
  CHECK(r.lps[5] == -INFINITY);
  CHECK(std::isfinite(r.lps[0]));
  CHECK(r.lps[0] == r.lps[2]);
  const Reduced none = reduce(row, 0, 1);
  CHECK(none.target == r.lps[0]);
  const std::vector<float> flat(4, 0.5f);
  CHECK(reduce(flat, 2, 3).target == doctest::Approx(-std::log(4.0)));
  CHECK(reduce(flat, 2, 3).ids == std::vector<int32_t>{0, 1});
}

TEST_CASE("logprobs: top_k_indices ranks NaN last and keeps the order of equal values") {
  const std::vector<float> v = {NAN, 1.0f, 1.0f, 5.0f, NAN, 0.0f};
  std::vector<int32_t> ids(6);
  top_k_indices(v.data(), 6, 6, ids.data());
  CHECK(ids == std::vector<int32_t>{3, 1, 2, 5, 0, 4});
}

TEST_CASE("logprobs: a host backend's answers, in chunks and from the step's own logits") {
  const int vocab = 97, rows = 2 * logprob_chunk_rows(vocab) + 9;
  std::vector<std::vector<float>> table;
  for (int r = 0; r < rows; ++r) table.push_back(random_row(vocab, 100 + r));
  RaggedBatch batch;
  batch.token_ids.assign(rows, 0);
  batch.logits_rows = {5, rows - 1};
  StepIo out;
  out.want_logits = false;
  for (int32_t r : batch.logits_rows) out.logits.insert(out.logits.end(), table[r].begin(), table[r].end());
  out.token_ids = {17, 42};
  for (int r = 0; r < rows; ++r) out.logprob_queries.push_back({r, r % 6, (r * 7) % vocab});
  out.logprob_queries.push_back({5, 3, -1});
  out.logprob_queries.push_back({rows - 1, 5, -1});
  out.logprob_width = 5;
  int calls = 0;
  const LogitsHead head = [&](const int32_t* ids, int n, float* logits) {
    CHECK(n <= logprob_chunk_rows(vocab));
    ++calls;
    for (int i = 0; i < n; ++i) std::copy(table[ids[i]].begin(), table[ids[i]].end(), logits + static_cast<size_t>(i) * vocab);
  };
  ThreadPool pool(2);
  answer_logprob_queries(batch, vocab, head, pool, out, out);
  CHECK(calls == 3);
  for (size_t q = 0; q < out.logprob_queries.size(); ++q) {
    const LogprobQuery& query = out.logprob_queries[q];
    const int32_t target = query.target >= 0 ? query.target : out.token_ids[query.row == 5 ? 0 : 1];
    const Reduced want = reduce(table[query.row], query.k, target);
    CAPTURE(q);
    CHECK(out.logprobs.target_logprob[q] == want.target);
    for (int j = 0; j < out.logprob_width; ++j) {
      CHECK(out.logprobs.top_ids[q * 5 + j] == (j < query.k ? want.ids[j] : -1));
      if (j < query.k) CHECK(out.logprobs.top_logprobs[q * 5 + j] == want.lps[j]);
    }
  }
}

TEST_CASE("logprobs: request fields") {
  auto parse = [](std::string_view line) { return parse_request_line(line, 3, RequestDefaults{}); };
  auto ok = [&](std::string_view line) {
    ParsedRequest r = parse(line);
    if (auto* e = std::get_if<RequestError>(&r)) FAIL(e->message);
    return std::get<RequestInput>(r).sampling;
  };
  auto error = [&](std::string_view line) {
    ParsedRequest r = parse(line);
    REQUIRE_MESSAGE(std::holds_alternative<RequestError>(r), "accepted: " << line);
    return std::get<RequestError>(r).message;
  };
  const SamplingParams simple = ok(R"({"prompt": "a", "logprobs": 3, "prompt_logprobs": 0})");
  CHECK(simple.logprobs == 3);
  CHECK(simple.prompt_logprobs == 0);
  CHECK(ok(R"({"prompt": "a", "logprobs": null})").logprobs == -1);
  CHECK(error(R"({"prompt": "a", "logprobs": 21})") ==
        "line 3: field 'logprobs' must be an integer from 0 to 20 (--max-logprobs) (got 21)");
  CHECK(error(R"({"prompt": "a", "prompt_logprobs": -1})").find("'prompt_logprobs'") != std::string::npos);
  CHECK(error(R"({"prompt": "a", "logprobs": 2.5})").find("(got 2.5)") != std::string::npos);
  CHECK(error(R"({"prompt": "a", "echo": true})").find("'echo'") != std::string::npos);
  const std::string chat = R"({"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "a"}], )";
  CHECK(ok(chat + R"("logprobs": true, "top_logprobs": 4}})").logprobs == 4);
  CHECK(ok(chat + R"("logprobs": true}})").logprobs == 0);
  CHECK(ok(chat + R"("logprobs": false}})").logprobs == -1);
  CHECK(error(chat + R"("top_logprobs": 2}})") == "line 3: field 'body.top_logprobs' needs 'body.logprobs': true");
  CHECK(error(chat + R"("logprobs": 3}})").find("'body.logprobs'") != std::string::npos);
  CHECK(error(chat + R"("logprobs": true, "echo": false}})").find("'body.echo'") != std::string::npos);
  const std::string cmpl = R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": "a", )";
  const SamplingParams echo = ok(cmpl + R"("logprobs": 2, "echo": true}})");
  CHECK(echo.echo);
  CHECK(echo.prompt_logprobs == 2);
  CHECK(ok(cmpl + R"("echo": true}})").prompt_logprobs == -1);
}

TEST_CASE("logprobs: tokens that are not UTF-8 alone are shown as bytes") {
  CHECK(token_display(" the") == " the");
  CHECK(token_display("\xc3\xa9") == "\xc3\xa9");
  CHECK(token_display("\xe2\x80") == "bytes:\\xe2\\x80");
  CHECK(token_display("") == "");
}

}  // namespace cbatch::test
