// Structured outputs drawn on the GPU (--cuda-kernel sampling=device, the default): an engine run of
// regex-constrained requests (sampled, top-k, penalized, one allowing only EOS once matched, one that no
// token can start) on the CUDA backend gives the same tokens whether its rows are masked and drawn on the
// device or their logits are masked and drawn by the host's Sampler.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.hpp"
#include "engine/bench/bench_workload.hpp"
#include "engine/core/engine.hpp"
#include "tests/engine/test_model_fixture.hpp"

namespace cbatch::test {

namespace {

std::vector<SourceItem> constrained_requests() {
  const std::vector<std::string> regexes = {"[a-f]+", "(ab|cd){2,6}", "abc", "[a-z]{3,9}", "[0-9]", "a[0-9]"};
  std::vector<SourceItem> items;
  for (int i = 0; i < 24; ++i) {
    Request r;
    r.index = i;
    r.line = i + 1;
    r.id_json = std::to_string(i);
    r.prompt_ids = {1, 3 + i, 40 + 7 * i % 200, 5};
    r.rng_seed = 500 + static_cast<uint64_t>(i);
    SamplingParams& p = r.sampling;
    p.max_tokens = 4 + i % 11;
    p.temperature = i % 3 == 0 ? 0.0f : 0.9f;
    if (i % 4 == 1) p.top_k = 3;
    if (i % 5 == 2) p.repetition_penalty = 1.4f;
    if (i % 7 != 6) p.constraint = {ConstraintSpec::Kind::kRegex, {regexes[static_cast<size_t>(i) % regexes.size()]}};
    items.emplace_back(std::move(r));
  }
  return items;
}

// Each request's output tokens, and the rows sampled under a constraint over the run's steps.
std::map<int64_t, std::vector<int32_t>> run_engine(const Model& model, bool device_sampling, int& constrained_rows) {
  CudaBackendOptions options;
  options.max_batch_tokens = 256;
  options.max_num_seqs = 8;
  options.max_context = 256;
  options.kernels.device_sampling = device_sampling;
  std::unique_ptr<Backend> backend = make_cuda_backend(model, options);
  REQUIRE(backend->traits().samples_on_device == device_sampling);
  EngineConfig config;
  config.scheduler = {Mode::kContinuous, 256, 8, 16};
  config.kv_cache_blocks = 128;
  Engine engine(config, model, *backend);
  VectorSource source(constrained_requests());
  CollectingSink sink;
  EngineHooks hooks;
  constrained_rows = 0;
  hooks.on_step = [&constrained_rows](const StepRecord& r) { constrained_rows += r.constrained_rows; };
  const RunSummary summary = engine.run(source, sink, hooks);
  CHECK(summary.requests_ok == 24);
  std::map<int64_t, std::vector<int32_t>> outputs;
  for (size_t i = 0; i < sink.results.size(); ++i) outputs[sink.requests[i].index] = sink.results[i].output_token_ids;
  return outputs;
}

}  // namespace

TEST_CASE("CUDA backend: constrained rows masked and drawn on the device give the host path's tokens") {
  testing::TestModelShape shape;
  shape.dim = 128;
  shape.heads = 2;
  shape.kv_heads = 1;  // head_dim 64
  const Model model = testing::make_test_model(shape);
  int host_rows = 0, device_rows = 0;
  const auto host = run_engine(model, false, host_rows);
  const auto device = run_engine(model, true, device_rows);
  CHECK(device == host);
  CHECK(host_rows > 0);
  CHECK(device_rows == host_rows);
}

}  // namespace cbatch::test
