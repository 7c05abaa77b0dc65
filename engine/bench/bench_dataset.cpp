#include "engine/bench/bench_dataset.hpp"

#include "engine/bench/sharegpt_dataset.hpp"
#include "engine/bench/sharegpt_synthetic.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

constexpr std::string_view kShareGptPrefix = "sharegpt:";

bool is_sharegpt_file(const std::string& dataset) { return dataset.rfind(kShareGptPrefix, 0) == 0; }

}  // namespace

bool is_generated_dataset(const std::string& dataset) {
  return dataset == "random" || dataset == "sharegpt-synthetic" || is_sharegpt_file(dataset);
}

std::vector<Request> make_generated_workload(const std::string& dataset, const WorkloadSpec& spec,
                                             const Model& model) {
  if (dataset == "random") return make_random_workload(spec, model);
  if (spec.prefix_len != 0 && is_generated_dataset(dataset)) {
    throw Error("--prefix-len " + std::to_string(spec.prefix_len) +
                ": shared prefixes are made by the random dataset only, not by '" + dataset + "'");
  }
  if (dataset == "sharegpt-synthetic") return make_synthetic_sharegpt_workload(spec, model);
  if (is_sharegpt_file(dataset)) {
    const std::string path = dataset.substr(kShareGptPrefix.size());
    if (path.empty()) throw Error("--dataset sharegpt:FILE: the file name is missing");
    return make_sharegpt_workload(path, spec, model);
  }
  throw Error("--dataset '" + dataset + "' is not a generated dataset");
}

RealizedLengths realized_lengths(const std::vector<Request>& requests) {
  RealizedLengths lengths;
  if (requests.empty()) return lengths;
  double input = 0;
  double output = 0;
  for (const Request& r : requests) {
    input += static_cast<double>(r.prompt_ids.size());
    output += r.sampling.max_tokens;
  }
  lengths.mean_input_len = input / static_cast<double>(requests.size());
  lengths.mean_output_len = output / static_cast<double>(requests.size());
  return lengths;
}

}  // namespace cbatch
