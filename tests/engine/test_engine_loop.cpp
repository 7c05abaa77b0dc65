// The engine loop on a small random model: outputs identical across modes, budgets, sequence caps and a
// preempting cache, and with a backend that draws sampled tokens itself; requests that cannot fit get an
// error; max_tokens 0 finishes without computing.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/bench/bench_workload.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/core/engine.hpp"
#include "engine/sample/radix_sampling.hpp"
#include "engine/sample/token_mask.hpp"
#include "test_model_fixture.hpp"

using namespace cbatch;

namespace {

std::vector<SourceItem> workload(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SourceItem> items;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.index = i;
    r.line = i + 1;
    r.id_json = std::to_string(i);
    r.prompt_ids.push_back(1);
    for (int t = static_cast<int>(rng() % 40); t > 0; --t) r.prompt_ids.push_back(3 + static_cast<int>(rng() % 290));
    r.sampling.max_tokens = 1 + static_cast<int>(rng() % 30);
    if (i % 2 == 0) {
      r.sampling.temperature = 0.0f;
    } else {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
    }
    r.sampling.ignore_eos = i % 3 == 0;
    r.rng_seed = 1000 + i;
    items.emplace_back(std::move(r));
  }
  return items;
}

struct Outcome {
  std::map<int64_t, std::vector<int32_t>> outputs;
  RunSummary summary;
  std::vector<RequestError> errors;
  int64_t sampled_tokens = 0;  // summed over the step records
};

Outcome run(const Model& model, Backend& backend, SchedulerConfig sched, int kv_blocks, std::vector<SourceItem> items) {
  EngineConfig config;
  config.scheduler = sched;
  config.kv_cache_blocks = kv_blocks;
  Engine engine(config, model, backend);
  VectorSource source(std::move(items));
  CollectingSink sink;
  Outcome o;
  EngineHooks hooks;
  hooks.on_step = [&o](const StepRecord& r) { o.sampled_tokens += r.sampled_tokens; };
  o.summary = engine.run(source, sink, hooks);
  for (size_t i = 0; i < sink.results.size(); ++i) o.outputs[sink.requests[i].index] = sink.results[i].output_token_ids;
  o.errors = sink.errors;
  return o;
}

}  // namespace

TEST_CASE("engine outputs are identical across modes, budgets, caps and preemption") {
  const Model model = testing::make_test_model({});
  auto backend = make_cpu_backend(model, {});
  const auto items = workload(60, 3);
  const Outcome ref = run(model, *backend, {Mode::kContinuous, 4096, 256, 16}, 0, items);
  REQUIRE(ref.outputs.size() == 60);
  CHECK(ref.summary.requests_ok == 60);
  struct Case {
    SchedulerConfig sched;
    int blocks;
  };
  const Case cases[] = {{{Mode::kContinuous, 8, 256, 16}, 0},  {{Mode::kContinuous, 50, 3, 4}, 0},
                        {{Mode::kContinuous, 128, 32, 4}, 20}, {{Mode::kStatic, 4096, 8, 16}, 0},
                        {{Mode::kStatic, 40, 5, 2}, 0},        {{Mode::kSequential, 16, 256, 16}, 0}};
  for (const Case& c : cases) {
    const Outcome o = run(model, *backend, c.sched, c.blocks, items);
    CHECK(o.outputs == ref.outputs);
    CHECK(o.summary.requests_ok == 60);
    CHECK(o.sampled_tokens == o.summary.output_tokens);  // every generated token counted once, preempted or not
    if (c.blocks) CHECK(o.summary.preemptions > 0);
    CHECK((o.summary.padding_fraction > 0) == (c.sched.mode == Mode::kStatic));
  }
}

TEST_CASE("engine rejects a request that can never fit the cache and finishes max_tokens 0 at once") {
  const Model model = testing::make_test_model({});
  auto backend = make_cpu_backend(model, {});
  auto items = workload(3, 4);
  std::get<Request>(items[0]).sampling.max_tokens = 200;  // 200+ tokens > 8 blocks of 16
  std::get<Request>(items[1]).sampling.max_tokens = 0;
  const Outcome o = run(model, *backend, {Mode::kContinuous, 256, 8, 16}, 8, items);
  REQUIRE(o.errors.size() == 1);
  CHECK(o.errors[0].message.find("KV blocks") != std::string::npos);
  CHECK(o.errors[0].index == 0);
  CHECK(o.outputs.size() == 2);
  CHECK(o.outputs.at(1).empty());
  CHECK(o.summary.requests_failed == 1);
}

namespace {

// A producer that is slow: item i arrives once the engine has run i steps. next() before then stands for
// a blocking read and is counted.
class TricklingSource final : public RequestSource {
 public:
  explicit TricklingSource(std::vector<SourceItem> items) : items_(std::move(items)) {}
  bool next(SourceItem& item) override {
    if (next_ == items_.size()) return false;
    if (!ready()) ++num_waits;
    item = std::move(items_[next_++]);
    return true;
  }
  bool ready() const override { return next_ == items_.size() || static_cast<int64_t>(next_) <= steps; }

  int64_t steps = 0;
  int num_waits = 0;

 private:
  std::vector<SourceItem> items_;
  size_t next_ = 0;
};

}  // namespace

TEST_CASE("engine runs steps instead of waiting on a source that is not ready, and loses nothing") {
  const Model model = testing::make_test_model({});
  auto backend = make_cpu_backend(model, {});
  auto items = workload(30, 5);
  for (SourceItem& item : items) {  // every request lives at least two steps, so there is always one to run
    auto& sampling = std::get<Request>(item).sampling;
    sampling.max_tokens = std::max(sampling.max_tokens, 2);
    sampling.ignore_eos = true;
  }
  const Outcome ref = run(model, *backend, {Mode::kContinuous, 4096, 256, 16}, 0, items);
  for (Mode mode : {Mode::kContinuous, Mode::kStatic, Mode::kSequential}) {
    EngineConfig config;
    config.scheduler = {mode, 4096, 256, 16};
    Engine engine(config, model, *backend);
    TricklingSource source(items);
    CollectingSink sink;
    EngineHooks hooks;
    hooks.on_step = [&source](const StepRecord&) { ++source.steps; };
    const RunSummary summary = engine.run(source, sink, hooks);
    CHECK(summary.requests_ok == 30);
    std::map<int64_t, std::vector<int32_t>> outputs;
    for (size_t i = 0; i < sink.results.size(); ++i) outputs[sink.requests[i].index] = sink.results[i].output_token_ids;
    CHECK(outputs == ref.outputs);
    // It always had a step to run while it waited for the next item, so it never read before the item came.
    CHECK(source.num_waits == 0);
    CHECK(source.steps >= 30);
  }
}

namespace {

// A backend that samples "on its device" the way the CUDA backend does: mask, penalties, then the device
// algorithm with its host primitives, over the CPU backend's logits; it counts the steps it was asked
// for draws and for logits.
class HostDrawingBackend final : public Backend {
 public:
  explicit HostDrawingBackend(Backend& inner) : inner_(inner), traits_(inner.traits()) {
    traits_.samples_on_device = true;
  }
  const BackendTraits& traits() const override { return traits_; }
  int64_t kv_block_bytes(int block_size) const override { return inner_.kv_block_bytes(block_size); }
  int64_t max_kv_blocks(int block_size) const override { return inner_.max_kv_blocks(block_size); }
  void allocate_kv_cache(const KvCacheSpec& spec) override { inner_.allocate_kv_cache(spec); }

  void forward(const RaggedBatch& batch, const StepRequest& request, StepResult& out) override {
    if (request.sampling.empty()) {
      num_logit_steps += request.want_logits;
      return inner_.forward(batch, request, out);
    }
    ++num_draw_steps;
    REQUIRE(!request.want_logits);
    REQUIRE(request.sampling.size() == static_cast<size_t>(batch.num_logits()));
    StepRequest logits_request = request;
    logits_request.want_logits = true;
    inner_.forward(batch, logits_request, out);
    const int vocab = static_cast<int>(out.logits.size()) / batch.num_logits();
    out.token_ids.clear();
    for (int r = 0; r < batch.num_logits(); ++r) {
      float* row = &out.logits[static_cast<size_t>(r) * vocab];
      const RowSampling& sampling = request.sampling[static_cast<size_t>(r)];
      if (sampling.mask_offset >= 0) {
        apply_token_mask(row, vocab, &request.token_mask[static_cast<size_t>(sampling.mask_offset)]);
      }
      apply_penalty_tokens(row, vocab, sampling, request.penalty_tokens.data());
      radix_sampling::HostRowOps ops(row, vocab);
      out.token_ids.push_back(radix_sampling::sample_row(ops, sampling, vocab));
    }
  }

  int num_draw_steps = 0;
  int num_logit_steps = 0;

 private:
  Backend& inner_;
  BackendTraits traits_;
};

}  // namespace

TEST_CASE("engine: a backend that draws on its device gives the host sampler's tokens, penalties included") {
  const Model model = testing::make_test_model({});
  auto cpu = make_cpu_backend(model, {});
  auto items = workload(40, 6);
  for (size_t i = 0; i < items.size(); ++i) {  // every filter and penalty, on sampled and greedy requests
    auto& sampling = std::get<Request>(items[i]).sampling;
    if (i % 4 == 1) sampling.top_k = 5;
    if (i % 4 == 3) sampling.min_p = 0.1f;
    if (i % 5 == 2) sampling.repetition_penalty = 1.3f;
    if (i % 7 == 3) sampling.frequency_penalty = 0.4f;
    if (i % 6 == 4) sampling.presence_penalty = -0.5f;
  }
  const Outcome ref = run(model, *cpu, {Mode::kContinuous, 4096, 8, 16}, 0, items);
  HostDrawingBackend drawing(*cpu);
  const Outcome o = run(model, drawing, {Mode::kContinuous, 4096, 8, 16}, 0, items);
  CHECK(o.outputs == ref.outputs);
  CHECK(o.summary.requests_ok == 40);
  CHECK(drawing.num_draw_steps > 0);
  CHECK(drawing.num_logit_steps == 0);  // it never needed the host's Sampler
}

TEST_CASE("engine: constrained rows drawn on the device get the host's tokens from the step's masks") {
  const Model model = testing::make_test_model({});
  auto cpu = make_cpu_backend(model, {});
  auto items = workload(40, 8);
  // The test tokenizer's pieces are single letters: "abc" allows only EOS once matched, "[0-9]" no
  // token at all (the row ends with length at once), "a[0-9]" none after its first token.
  const std::vector<std::string> regexes = {"[a-f]+", "(ab|cd){2,6}", "abc", "[a-z]{3,9}", "[0-9]", "a[0-9]"};
  for (size_t i = 0; i < items.size(); ++i) {
    auto& sampling = std::get<Request>(items[i]).sampling;
    if (i % 5 == 4) continue;  // unconstrained rows share the steps
    sampling.constraint = {ConstraintSpec::Kind::kRegex, {regexes[i % regexes.size()]}};
    sampling.ignore_eos = false;
    if (i % 4 == 1) sampling.top_k = 3;
    if (i % 3 == 2) sampling.repetition_penalty = 1.4f;
    if (i % 7 == 3) sampling.frequency_penalty = 0.6f;
  }
  const Outcome ref = run(model, *cpu, {Mode::kContinuous, 4096, 8, 16}, 0, items);
  HostDrawingBackend drawing(*cpu);
  const Outcome o = run(model, drawing, {Mode::kContinuous, 4096, 8, 16}, 0, items);
  CHECK(o.summary.requests_ok == 40);
  CHECK(o.outputs == ref.outputs);
  CHECK(drawing.num_draw_steps > 0);
  CHECK(drawing.num_logit_steps == 0);  // the masks went with the draws: no step needed the host's Sampler
  int empty = 0, abc_eos = 0, cut_after_a = 0;
  for (const auto& [index, tokens] : o.outputs) {
    const bool constrained = index % 5 != 4;
    empty += tokens.empty();
    abc_eos += constrained && index % 6 == 2 && tokens.size() == 4 && tokens.back() == 2;
    cut_after_a += constrained && index % 6 == 5 && tokens.size() == 1;
  }
  CHECK(empty == 4);        // the "[0-9]" requests
  CHECK(abc_eos == 5);      // "abc" matched, then EOS as the only choice (the sixth has max_tokens 1)
  CHECK(cut_after_a == 5);  // "a[0-9]": no token after the first
}
