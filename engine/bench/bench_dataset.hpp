// The generated workloads of `cbatch bench --dataset NAME`: "random" (uniform lengths, bench_workload.hpp),
// "sharegpt-synthetic" (ShareGPT-like lengths without a file) and "sharegpt:FILE" (a ShareGPT-format JSON
// file sampled as vLLM samples it). Any other name is a JSONL prompts file, which the caller reads.
#pragma once
#include <string>
#include <vector>

#include "engine/bench/bench_workload.hpp"

namespace cbatch {

bool is_generated_dataset(const std::string& dataset);

// Throws cbatch::Error for a name that is not a generated dataset.
std::vector<Request> make_generated_workload(const std::string& dataset, const WorkloadSpec& spec,
                                             const Model& model);

// Mean prompt tokens and mean max_tokens (the forced output length) of generated requests.
struct RealizedLengths {
  double mean_input_len = 0;
  double mean_output_len = 0;
};
RealizedLengths realized_lengths(const std::vector<Request>& requests);

}  // namespace cbatch
