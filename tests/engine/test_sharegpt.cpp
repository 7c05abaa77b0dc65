// The ShareGPT bench datasets: Python's shuffle reproduced (vectors from CPython 3.11), vLLM's length
// filter, the file reader (order of the sample, escapes, errors that name the file and the entry) and the
// synthetic lengths (means and percentiles of 10,000 draws against the fitted targets, reproducibility).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "engine/bench/bench_dataset.hpp"
#include "engine/bench/passages_synthetic.hpp"
#include "engine/bench/python_random.hpp"
#include "engine/bench/sharegpt_dataset.hpp"
#include "engine/bench/sharegpt_synthetic.hpp"
#include "list_tokenizer.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempFile;

std::string words(int n) {
  std::string text = "w";
  for (int i = 1; i < n; ++i) text += " w";
  return text;
}

// One id per space-separated word: lengths in the file are then known exactly.
std::vector<int32_t> encode_words(const std::string& text) {
  return std::vector<int32_t>(static_cast<size_t>(std::count(text.begin(), text.end(), ' ') + 1), 7);
}

// 40 entries: k % 7 == 3 has no "conversations", k % 5 == 4 one turn, the others a prompt of
// (37k mod 1100) + 1 words and a reply of (53k mod 1500) + 1 words (and a third turn when k is even).
std::string numbered_file() {
  std::string json = "[";
  for (int k = 0; k < 40; ++k) {
    const std::string prompt = "{\"from\": \"human\", \"value\": \"" + words(k * 37 % 1100 + 1) + "\"}";
    const std::string reply = "{\"from\": \"gpt\", \"value\": \"" + words(k * 53 % 1500 + 1) + "\"}";
    json += k == 0 ? "\n" : ",\n";
    if (k % 7 == 3) {
      json += "{\"id\": \"" + std::to_string(k) + "\"}";
    } else if (k % 5 == 4) {
      json += "{\"id\": \"" + std::to_string(k) + "\", \"conversations\": [" + prompt + "]}";
    } else {
      json += "{\"conversations\": [" + prompt + ", " + reply + (k % 2 == 0 ? ", " + prompt : "") + "], \"id\": 1}";
    }
  }
  return json + "]\n";
}

double mean_of(const std::vector<int>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double percentile(std::vector<int> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

TEST_CASE("PythonRandom: the words, bits and shuffles of CPython's random") {
  PythonRandom zero(0);
  CHECK(zero.next_u32() == 3626764237u);
  CHECK(zero.next_u32() == 1654615998u);
  CHECK(zero.next_u32() == 3255389356u);
  PythonRandom thousand(1000);
  CHECK(thousand.getrandbits(5) == 24u);
  CHECK(thousand.getrandbits(17) == 56226u);

  std::vector<int> ten(10);
  std::iota(ten.begin(), ten.end(), 0);
  PythonRandom(0).shuffle(ten);
  CHECK(ten == std::vector<int>{7, 8, 1, 5, 3, 4, 2, 0, 9, 6});
  std::vector<int> twenty(20);  // a seed of two 32-bit words
  std::iota(twenty.begin(), twenty.end(), 0);
  PythonRandom(12345678901234ull).shuffle(twenty);
  CHECK(twenty == std::vector<int>{18, 19, 1, 8, 10, 16, 15, 9, 14, 5, 2, 3, 6, 7, 11, 12, 13, 4, 17, 0});
  std::vector<int64_t> many(100000);  // past the 624-word state many times, randbelow over 17 bits
  std::iota(many.begin(), many.end(), 0);
  PythonRandom(7).shuffle(many);
  const std::vector<int64_t> first_five(many.begin(), many.begin() + 5);
  CHECK(first_five == std::vector<int64_t>{26567, 77215, 84363, 16229, 78976});
  int64_t checksum = 0;
  for (size_t i = 0; i < many.size(); ++i) checksum = (checksum + static_cast<int64_t>(i) * many[i]) % 1000003;
  CHECK(checksum == 51473);
}

TEST_CASE("ShareGptFilter: vLLM's bounds, and the model's context") {
  const ShareGptFilter filter;
  CHECK(filter.accepts(4, 4));
  CHECK_FALSE(filter.accepts(3, 100));
  CHECK_FALSE(filter.accepts(100, 3));
  CHECK(filter.accepts(1024, 1024));
  CHECK_FALSE(filter.accepts(1025, 4));
  CHECK_FALSE(filter.accepts(1024, 1025));
  CHECK(filter.accepts(4, 2044));
  CHECK_FALSE(filter.accepts(4, 2045));
  const ShareGptFilter small = ShareGptFilter::for_context(512);
  CHECK(small.accepts(500, 12));
  CHECK_FALSE(small.accepts(500, 13));
  CHECK(small.accepts(4, 508));
  CHECK(ShareGptFilter::for_context(8192).max_total_len == 2048);
  CHECK(ShareGptFilter::for_context(8192).max_prompt_len == 1024);
}

TEST_CASE("ShareGPT file: conversations with two turns, in the order vLLM samples them") {
  const TempFile file(numbered_file());
  const ShareGptFile sharegpt(file.path());
  CHECK(sharegpt.num_conversations() == 27);  // 40 less 6 without "conversations" less 7 with one turn
  // Expected from vLLM's procedure in Python: random.seed(3); random.shuffle(those 27); filter; first 8.
  const std::vector<std::pair<int, int>> expected = {{297, 425}, {196, 356}, {11, 91}, {122, 250},
                                                     {38, 54},   {260, 372}, {667, 955}, {556, 796}};
  const auto samples = sample_sharegpt(sharegpt, 3, 8, ShareGptFilter{}, encode_words);
  REQUIRE(samples.size() == expected.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    CHECK(static_cast<int>(samples[i].prompt_ids.size()) == expected[i].first);
    CHECK(samples[i].output_len == expected[i].second);
  }
  CHECK(sample_sharegpt(sharegpt, 3, 100, ShareGptFilter{}, encode_words).size() == 21);  // all that pass
  const auto other_seed = sample_sharegpt(sharegpt, 4, 8, ShareGptFilter{}, encode_words);
  CHECK(other_seed[0].prompt_ids.size() != samples[0].prompt_ids.size());
}

TEST_CASE("ShareGPT file: a turn's value is unescaped") {
  const TempFile file(R"([{"conversations": [{"value": "say \"hi\"\n\u00e9\ud83d\ude00"}, {"value": "a\\b"}]}])");
  const ShareGptFile sharegpt(file.path());
  CHECK(sharegpt.turn_text(0, 0) == "say \"hi\"\n\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(sharegpt.turn_text(0, 1) == "a\\b");
}

TEST_CASE("ShareGPT file: errors name the file, the conversation and the problem") {
  auto error_for = [](const std::string& json) {
    const TempFile file(json);
    const std::string message = error_of([&] {
      const ShareGptFile sharegpt(file.path());
      for (size_t i = 0; i < sharegpt.num_conversations(); ++i) sharegpt.turn_text(i, 1);
    });
    CHECK(message.find(file.path()) != std::string::npos);
    return message;
  };
  CHECK(error_for(R"({"conversations": []})").find("expected a JSON list of conversations") != std::string::npos);
  CHECK(error_for(R"([{"conversations": []}, 5])").find("conversation 1 (0-based) is not an object") !=
        std::string::npos);
  CHECK(error_for(R"([{"conversations": "ab"}])").find("conversation 0 (0-based)'s 'conversations' is not a list") !=
        std::string::npos);
  CHECK(error_for(R"([{"conversations": [{"value": "a"}, "b"]}])")
            .find("conversation 0 (0-based), turn 1 is not an object") != std::string::npos);
  CHECK(error_for(R"([{}, {"conversations": [{"value": "a"}, {"value": 5}]}])")
            .find("conversation 1 (0-based), turn 1: no string field 'value'") != std::string::npos);
  CHECK(error_for(R"([{"conversations": [{"value": "a"}, {"value": "b)").find("ShareGPT file") != std::string::npos);
  CHECK(error_for(R"([{"conversations": []}] [])").find("content after the list of conversations") !=
        std::string::npos);
  CHECK(error_of([] { ShareGptFile("no/such/sharegpt.json"); }).find("'no/such/sharegpt.json': cannot read it") !=
        std::string::npos);
}

TEST_CASE("sharegpt-synthetic: 10,000 draws have the fitted means and percentiles") {
  for (uint64_t seed : {1ull, 2ull}) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    ShareGptLengthSampler sampler(ShareGptLengthModel{}, ShareGptFilter{});
    std::vector<int> input, output;
    for (int i = 0; i < 10000; ++i) {
      const LengthPair pair = sampler.next(rng);
      REQUIRE(ShareGptFilter{}.accepts(pair.input, pair.output));
      input.push_back(pair.input);
      output.push_back(pair.output);
    }
    // Targets from tools/fit_sharegpt_synthetic.py (20M draws): means 229.7 / 203.1, p50 144 / 129,
    // p90 584 / 456. The standard error of a 10,000-draw mean is about 1%.
    CHECK(mean_of(input) == doctest::Approx(229.7).epsilon(0.03));
    CHECK(mean_of(output) == doctest::Approx(203.1).epsilon(0.03));
    CHECK(percentile(input, 0.5) == doctest::Approx(144).epsilon(0.05));
    CHECK(percentile(output, 0.5) == doctest::Approx(129).epsilon(0.05));
    CHECK(percentile(input, 0.9) == doctest::Approx(584).epsilon(0.05));
    CHECK(percentile(output, 0.9) == doctest::Approx(456).epsilon(0.05));
  }
}

TEST_CASE("sharegpt-synthetic: the same seed gives the same workload") {
  Model model;
  model.tokenizer = std::make_unique<ListTokenizer>(std::vector<std::string>(1000, "x"));
  model.config.vocab_size = 1000;
  model.config.max_context = 8192;
  WorkloadSpec spec;
  spec.num_prompts = 50;
  spec.seed = 11;
  const auto a = make_synthetic_sharegpt_workload(spec, model);
  const auto b = make_synthetic_sharegpt_workload(spec, model);
  spec.seed = 12;
  const auto c = make_synthetic_sharegpt_workload(spec, model);
  REQUIRE(a.size() == 50);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].prompt_ids == b[i].prompt_ids);
    CHECK(a[i].sampling.max_tokens == b[i].sampling.max_tokens);
    CHECK(a[i].sampling.ignore_eos);
    CHECK(ShareGptFilter{}.accepts(static_cast<int>(a[i].prompt_ids.size()), a[i].sampling.max_tokens));
    differs = differs || a[i].prompt_ids != c[i].prompt_ids;
  }
  CHECK(differs);
  spec.prefix_len = 16;
  CHECK(error_of([&] { make_generated_workload("sharegpt-synthetic", spec, model); })
            .find("--prefix-len 16: shared prefixes are made by the random dataset only") != std::string::npos);
  spec.prefix_len = 0;
  model.config.max_context = 6;  // no pair of at least 4 + 4 tokens fits
  CHECK(error_of([&] { make_synthetic_sharegpt_workload(spec, model); }).find("context of 6") != std::string::npos);
}

TEST_CASE("PythonRandom: random() and normalvariate() draw CPython's values") {
  PythonRandom a(0);  // random.Random(0).random() three times
  CHECK(a.random() == 0.8444218515250481);
  CHECK(a.random() == 0.7579544029403025);
  CHECK(a.random() == 0.420571580830845);
  PythonRandom b(7);  // random.Random(7).normalvariate(1.5, 0.3), then (0, 1)
  CHECK(b.normalvariate(1.5, 0.3) == doctest::Approx(1.3932275251468287).epsilon(1e-15));
  CHECK(b.normalvariate(0.0, 1.0) == doctest::Approx(0.27915309343878736).epsilon(1e-15));
}

TEST_CASE("passages-synthetic: the lines tools/embed_bench.py makes from the same seed") {
  const std::string text = passages_synthetic_jsonl(40, 5);  // make_passages(path, 40, 5) in Python
  CHECK(text.size() == 13965);
  CHECK(text.rfind("{\"id\": 0, \"input\": \"example student question science these to its change her science is", 0) == 0);
  CHECK(text.find("\n{\"id\": 39, \"input\": \"as music will has student by energy her") != std::string::npos);
  CHECK(passages_synthetic_jsonl(40, 6) != text);
}

}  // namespace cbatch
