// Synthetic benchmark workloads: random-token prompts with lengths drawn uniformly from ranges (after one
// of K shared random prefixes of P tokens when prefix_len > 0, vLLM's prefix-repetition dataset), forced
// output lengths (ignore_eos; greedy unless a temperature is set), reproducible from a seed; plus the
// in-memory source and the collecting sink bench runs them through.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "engine/model/model.hpp"
#include "engine/base/request_stream.hpp"

namespace cbatch {

struct LengthRange {
  int min = 0;
  int max = 0;
};

// "A" or "A:B" -> [A, B]; throws cbatch::Error naming `flag` on bad text or A > B.
LengthRange parse_length_range(const std::string& text, const std::string& flag);

struct WorkloadSpec {
  int num_prompts = 64;
  LengthRange input_len{16, 256};
  LengthRange output_len{16, 256};
  uint64_t seed = 0;
  float temperature = 0.0f;  // sampling of every request: greedy by default
  float top_p = 1.0f;
  int top_k = -1;
  int prefix_len = 0;        // tokens of the shared prefix before each prompt's own part
  int num_prefixes = 1;      // distinct prefixes, prompt i gets prefix i % num_prefixes
  int n = 1;                 // completions per prompt
};

// Output lengths are cut where prompt + output would exceed the model's context.
std::vector<Request> make_random_workload(const WorkloadSpec& spec, const Model& model);

// A token drawn uniformly from the model's vocabulary, never BOS or an end token.
int32_t draw_prompt_token(std::mt19937_64& rng, const Model& model);

// Generated request i (line i + 1, id "i") with the spec's sampling, ignore_eos and its seed.
Request make_bench_request(int i, std::vector<int32_t> prompt_ids, int max_tokens, const WorkloadSpec& spec);

class VectorSource final : public RequestSource {
 public:
  explicit VectorSource(std::vector<SourceItem> items) : items_(std::move(items)) {}
  bool next(SourceItem& item) override;

 private:
  std::vector<SourceItem> items_;
  size_t next_ = 0;
};

class CollectingSink final : public ResultSink {
 public:
  void on_result(const RequestResult& result) override;
  void on_error(const RequestError& error) override { errors.push_back(error); }

  std::vector<RequestResult> results;   // request pointers are cleared (they die with the run)
  std::vector<Request> requests;        // copies of the finished requests, same order as results
  std::vector<RequestError> errors;
};

}  // namespace cbatch
