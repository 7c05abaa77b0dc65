// Scripted scheduler scenarios: a fake engine that commits each plan (every sampled token is 7), with
// invariants checked every step: budget, sequence cap, block coverage, no request lost, every block back.
#include <doctest/doctest.h>

#include <memory>
#include <random>

#include "engine/core/scheduler.hpp"

using namespace cbatch;

namespace {

struct Workload {
  std::vector<std::unique_ptr<Sequence>> seqs;
  // embedding: the sequence is an embedding input (computed whole, nothing sampled).
  void add(int prompt_len, int max_tokens, bool embedding = false) {
    auto seq = std::make_unique<Sequence>();
    seq->tokens.assign(prompt_len, 1);
    seq->num_prompt_tokens = prompt_len;
    seq->max_total_tokens = prompt_len + max_tokens;
    auto request = std::make_shared<Request>();
    request->index = static_cast<int64_t>(seqs.size());
    if (embedding) request->embedding = EmbeddingParams{};
    seq->request = request;
    seqs.push_back(std::move(seq));
  }
};

struct RunResult {
  int steps = 0;
  int preemptions = 0;
  int padding = 0;
  int max_seqs_seen = 0;
  std::vector<int> finish_step;  // per sequence
};

RunResult run_to_completion(Workload& w, const SchedulerConfig& config, int num_blocks) {
  BlockManager blocks(num_blocks, config.block_size);
  auto scheduler = make_scheduler(config, blocks);
  for (auto& seq : w.seqs) scheduler->add(seq.get());
  RunResult result;
  result.finish_step.assign(w.seqs.size(), -1);
  while (scheduler->has_work()) {
    REQUIRE(result.steps < 100000);
    StepPlan plan = scheduler->schedule();
    REQUIRE_FALSE(plan.empty());
    result.preemptions += static_cast<int>(plan.preempted.size());
    CHECK(plan.num_rows() <= config.max_num_batched_tokens);
    CHECK(static_cast<int>(plan.seqs.size()) <= config.max_num_seqs);
    result.max_seqs_seen = std::max(result.max_seqs_seen, static_cast<int>(plan.seqs.size()));
    result.padding += plan.num_padding_tokens();
    for (const ScheduledSeq& s : plan.seqs) {
      Sequence& seq = *s.seq;
      CHECK(static_cast<int64_t>(seq.block_tables.num_blocks()) * config.block_size >= seq.num_computed + s.num_tokens);
      seq.num_computed += s.num_tokens;
      CHECK(seq.num_computed <= seq.num_tokens());
      if (!s.samples) continue;
      CHECK(seq.num_computed == seq.num_tokens());
      seq.tokens.push_back(7);
      if (seq.num_tokens() >= seq.max_total_tokens) {
        seq.finish_reason = FinishReason::kLength;
        result.finish_step[seq.request->index] = result.steps;
      }
    }
    for (Sequence* seq : scheduler->on_step_done(plan)) CHECK(seq->block_tables.empty());
    ++result.steps;
  }
  CHECK(blocks.num_free() == num_blocks);
  for (auto& seq : w.seqs) {
    CHECK(seq->is_finished());
    CHECK(seq->num_tokens() == seq->max_total_tokens);
  }
  return result;
}

Workload mixed_workload(int n, unsigned seed) {
  Workload w;
  std::mt19937 rng(seed);
  for (int i = 0; i < n; ++i) w.add(1 + static_cast<int>(rng() % 60), 1 + static_cast<int>(rng() % 30));
  return w;
}

}  // namespace

TEST_CASE("continuous: chunked prefill of a long prompt within the budget") {
  Workload w;
  w.add(100, 3);
  SchedulerConfig config{Mode::kContinuous, 32, 8, 16};
  const RunResult r = run_to_completion(w, config, 64);
  // 100 prompt tokens in chunks of 32: 4 steps, the 4th samples the first token; then 2 decode steps.
  CHECK(r.steps == 6);
  CHECK(r.finish_step[0] == 5);
}

TEST_CASE("continuous: prefill chunks and decodes share a step, finished slots refill next step") {
  Workload w;
  w.add(4, 1);   // finishes at its first sample
  w.add(4, 5);
  w.add(20, 2);  // waits for a slot (max_num_seqs 2)
  SchedulerConfig config{Mode::kContinuous, 64, 2, 4};
  BlockManager blocks(64, 4);
  auto scheduler = make_scheduler(config, blocks);
  for (auto& seq : w.seqs) scheduler->add(seq.get());
  StepPlan p0 = scheduler->schedule();
  REQUIRE(p0.seqs.size() == 2);
  CHECK(p0.num_prefill_tokens() == 8);
  for (auto& s : p0.seqs) {
    s.seq->num_computed += s.num_tokens;
    s.seq->tokens.push_back(7);
  }
  w.seqs[0]->finish_reason = FinishReason::kLength;
  CHECK(scheduler->on_step_done(p0).size() == 1);
  StepPlan p1 = scheduler->schedule();  // seq 1 decodes, seq 2 joins with its whole prompt
  REQUIRE(p1.seqs.size() == 2);
  CHECK(p1.seqs[0].seq == w.seqs[1].get());
  CHECK_FALSE(p1.seqs[0].is_prefill);
  CHECK(p1.num_decode_tokens() == 1);
  CHECK(p1.seqs[1].seq == w.seqs[2].get());
  CHECK(p1.num_prefill_tokens() == 20);
}

TEST_CASE("continuous: many requests, every budget and sequence cap, nothing lost") {
  for (int budget : {1, 7, 16, 64, 4096}) {
    for (int max_seqs : {1, 3, 16, 256}) {
      Workload w = mixed_workload(40, static_cast<unsigned>(budget * 31 + max_seqs));
      SchedulerConfig config{Mode::kContinuous, budget, max_seqs, 8};
      const RunResult r = run_to_completion(w, config, 512);
      CHECK(r.preemptions == 0);
      CHECK(r.padding == 0);
      CHECK(r.max_seqs_seen <= max_seqs);
    }
  }
}

TEST_CASE("continuous: a small cache forces preemption and everything still completes") {
  Workload w = mixed_workload(30, 5);
  SchedulerConfig config{Mode::kContinuous, 128, 16, 4};
  // The largest request needs ceil(90 / 4) = 23 blocks; 24 blocks can hold it alone.
  const RunResult r = run_to_completion(w, config, 24);
  CHECK(r.preemptions > 0);
}

TEST_CASE("continuous: an embedding request runs whole, waiting for a step with room, and shares the step") {
  Workload w;
  w.add(10, 6);  // generation: prefill then decodes, one token a step
  w.add(15, 0, /*embedding=*/true);  // 15 tokens whole, the budget is 16
  w.add(3, 0, /*embedding=*/true);   // behind it: waits too (arrival order)
  SchedulerConfig config{Mode::kContinuous, 16, 8, 4};
  BlockManager blocks(64, 4);
  auto scheduler = make_scheduler(config, blocks);
  for (auto& seq : w.seqs) scheduler->add(seq.get());
  auto commit = [&](StepPlan& plan) {
    for (auto& s : plan.seqs) {
      s.seq->num_computed += s.num_tokens;
      if (s.seq->request->embedding) {
        CHECK(s.num_tokens == s.seq->num_tokens());  // whole, in one step
        CHECK_FALSE(s.samples);
        s.seq->finish_reason = FinishReason::kStop;
      } else if (s.samples) {
        s.seq->tokens.push_back(7);
        if (s.seq->num_tokens() >= s.seq->max_total_tokens) s.seq->finish_reason = FinishReason::kLength;
      }
    }
    return scheduler->on_step_done(plan).size();
  };
  StepPlan p0 = scheduler->schedule();  // 10 of 16: the 15-token embedding does not fit, nor may the 3 pass it
  REQUIRE(p0.seqs.size() == 1);
  CHECK(p0.num_prefill_tokens() == 10);
  commit(p0);
  StepPlan p1 = scheduler->schedule();  // one decode + 15 = 16: the embedding joins the decode
  REQUIRE(p1.seqs.size() == 2);
  CHECK(p1.seqs[1].seq == w.seqs[1].get());
  CHECK(p1.num_rows() == 16);
  CHECK(commit(p1) == 1);               // done at its step, blocks returned
  StepPlan p2 = scheduler->schedule();
  REQUIRE(p2.seqs.size() == 2);
  CHECK(p2.seqs[1].seq == w.seqs[2].get());
  commit(p2);
  while (scheduler->has_work()) {
    StepPlan p = scheduler->schedule();
    commit(p);
  }
  CHECK(blocks.num_free() == 64);
  CHECK(blocks.num_cached() == 0);  // the embeddings' blocks never entered the prefix cache
}

TEST_CASE("sequential: one sequence at a time") {
  Workload w = mixed_workload(10, 9);
  SchedulerConfig config{Mode::kSequential, 16, 64, 8};
  const RunResult r = run_to_completion(w, config, 256);
  CHECK(r.max_seqs_seen == 1);
  for (size_t i = 1; i < w.seqs.size(); ++i) CHECK(r.finish_step[i] > r.finish_step[i - 1]);
}

TEST_CASE("static: prompts padded to the longest, finished slots computed until the batch ends") {
  Workload w;
  w.add(3, 1);
  w.add(5, 4);
  SchedulerConfig config{Mode::kStatic, 64, 2, 4};
  const RunResult r = run_to_completion(w, config, 64);
  // One prompt step of 2 x 5 rows (2 padding), then 3 decode steps of 2 rows; seq 0 is done after the
  // prompt step, so each decode step carries one padding row.
  CHECK(r.steps == 4);
  CHECK(r.padding == 2 + 3);
  CHECK(r.finish_step[0] == 0);
  CHECK(r.finish_step[1] == 3);
}

TEST_CASE("static: the padded prompt is chunked by the budget and the next batch waits") {
  Workload w = mixed_workload(20, 3);
  SchedulerConfig config{Mode::kStatic, 24, 4, 8};
  const RunResult r = run_to_completion(w, config, 512);
  CHECK(r.padding > 0);
  CHECK(r.max_seqs_seen == 4);
  // Batches finish in order: nobody from batch b+1 finishes before everyone of batch b has.
  for (int b = 1; b < 5; ++b) {
    int last_prev = 0, first_this = 1 << 30;
    for (int i = 0; i < 4; ++i) last_prev = std::max(last_prev, r.finish_step[(b - 1) * 4 + i]);
    for (int i = 0; i < 4; ++i) first_this = std::min(first_this, r.finish_step[b * 4 + i]);
    CHECK(first_this > last_prev);
  }
}
