// The synthetic ShareGPT workload (`cbatch bench --dataset sharegpt-synthetic`): no file, prompt and output
// lengths drawn as pairs from two log-normals and redrawn while the ShareGPT filter drops the pair, random
// prompt tokens (as the random dataset), forced output lengths (ignore_eos). The log-normals' locations are
// fitted (tools/fit_sharegpt_synthetic.py) so that the filtered means are 229.7 prompt and 203.1 output
// tokens: the 1,000-prompt ShareGPT sample of Llama-3.1-8B-Instruct in vLLM pull request 18566 (229,711
// input, 203,068 generated tokens). The spreads (sigma 1.4 and 1.0) are our choice of a long tail, not a
// published fit: the filtered medians are 144 and 129, p90 584 and 456, p99 956 and 1,148.
// Reproducible from the seed on every platform (our own normal draws, not std::normal_distribution).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "engine/bench/bench_workload.hpp"
#include "engine/bench/sharegpt_filter.hpp"

namespace cbatch {

struct LogNormalLength {
  double mu = 0;     // of the natural log of the length
  double sigma = 1;
};

struct ShareGptLengthModel {
  LogNormalLength input{5.14825, 1.4};
  LogNormalLength output{4.86351, 1.0};
};

struct LengthPair {
  int input = 0;
  int output = 0;
};

// Draws (prompt, output) pairs that pass `filter`; round(exp(mu + sigma * z)) per length.
class ShareGptLengthSampler {
 public:
  ShareGptLengthSampler(const ShareGptLengthModel& model, const ShareGptFilter& filter);
  LengthPair next(std::mt19937_64& rng);

 private:
  ShareGptLengthModel model_;
  ShareGptFilter filter_;
};

std::vector<Request> make_synthetic_sharegpt_workload(const WorkloadSpec& spec, const Model& model);

}  // namespace cbatch
