// The recurrent-state slot pool (engine/core/state_slots.hpp) on its own and under the continuous and static
// schedulers: every running sequence holds its own slot, preemption and finishing give it back, a forked
// sample gets a slot and a copy of its parent's, and every slot is back at the end.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>

#include "engine/base/error.hpp"
#include "engine/core/scheduler.hpp"
#include "engine/core/state_slots.hpp"

using namespace cbatch;

TEST_CASE("state slots: allocate until none is free, release, fork with a pending copy") {
  StateSlots slots(3);
  CHECK(slots.in_use());
  CHECK(slots.allocate() == 0);
  CHECK(slots.allocate() == 1);
  CHECK(slots.num_free() == 1);
  const int32_t child = slots.fork(0);
  CHECK(child == 2);
  CHECK(slots.allocate() == -1);
  CHECK(slots.fork(1) == -1);  // none free: no slot, no copy
  CHECK(slots.take_copies() == std::vector<int32_t>{0, 2});
  CHECK(slots.take_copies().empty());
  // A copy into a slot released before its step runs is dropped; one out of a released slot is kept (the
  // parent's state is still there when the step's copies run).
  slots.release(2);
  CHECK(slots.fork(1) == 2);
  slots.release(1);
  CHECK(slots.take_copies() == std::vector<int32_t>{1, 2});
  CHECK(slots.fork(0) == 1);
  slots.release(1);
  CHECK(slots.take_copies().empty());
  CHECK_THROWS_AS(slots.release(1), Error);  // not held
  slots.release(-1);                         // holds none: nothing
  slots.release(0);
  slots.release(2);
  CHECK(slots.num_free() == 3);
  CHECK_FALSE(StateSlots(0).in_use());
}

namespace {

// A fake engine over a scheduler with state slots: every sampled token is 7; a sequence with n > 1 forks at
// its first sample. Checks each step: distinct held slots for the planned sequences, the copies' slots.
struct SlotRun {
  std::vector<std::unique_ptr<Sequence>> seqs;
  int preemptions = 0;
  int copies = 0;

  void add(int prompt_len, int max_tokens, int n = 1) {
    auto seq = std::make_unique<Sequence>();
    seq->tokens.assign(prompt_len, 1);
    seq->num_prompt_tokens = prompt_len;
    seq->max_total_tokens = prompt_len + max_tokens;
    seq->pending_samples = n;
    auto request = std::make_shared<Request>();
    request->sampling.n = n;
    seq->request = request;
    seqs.push_back(std::move(seq));
  }

  void check_plan(const StepPlan& plan, const StateSlots& slots) {
    std::set<int32_t> held;
    for (const ScheduledSeq& s : plan.seqs) {
      CHECK(s.seq->state_slot >= 0);
      CHECK(s.seq->state_slot < slots.num_slots());
      CHECK(held.insert(s.seq->state_slot).second);
    }
    for (size_t i = 0; i < plan.state_copies.size(); i += 2) CHECK(held.count(plan.state_copies[i + 1]) == 1);
    copies += static_cast<int>(plan.state_copies.size() / 2);
    for (const Sequence* victim : plan.preempted) CHECK(victim->state_slot == -1);
    preemptions += static_cast<int>(plan.preempted.size());
  }

  void commit(const StepPlan& plan, Scheduler& scheduler, BlockManager& blocks) {
    std::vector<std::unique_ptr<Sequence>> children;
    for (const ScheduledSeq& s : plan.seqs) {
      Sequence& seq = *s.seq;
      seq.num_computed += s.num_tokens;
      if (!s.samples) continue;
      for (int i = 1; i < seq.pending_samples; ++i) children.push_back(std::make_unique<Sequence>(seq));
      seq.pending_samples = 1;
      seq.tokens.push_back(7);
      if (seq.num_tokens() >= seq.max_total_tokens) seq.finish_reason = FinishReason::kLength;
    }
    for (auto& child : children) {  // as the engine forks: a copy sharing the parent's blocks
      child->pending_samples = 1;
      child->tokens.push_back(7);
      if (child->num_tokens() >= child->max_total_tokens) child->finish_reason = FinishReason::kLength;
      blocks.share(child->block_tables);
      scheduler.add_forked(child.get());
      seqs.push_back(std::move(child));
    }
  }

  void run(const SchedulerConfig& config, int num_blocks, int num_slots) {
    BlockManager blocks(num_blocks, config.block_size);
    StateSlots slots(num_slots);
    auto scheduler = make_scheduler(config, blocks, &slots);
    for (auto& seq : seqs) scheduler->add(seq.get());
    for (int step = 0; scheduler->has_work(); ++step) {
      REQUIRE(step < 100000);
      const StepPlan plan = scheduler->schedule();
      REQUIRE_FALSE(plan.empty());
      check_plan(plan, slots);
      CHECK(slots.num_used() <= num_slots);
      commit(plan, *scheduler, blocks);
      for (Sequence* seq : scheduler->on_step_done(plan)) CHECK(seq->state_slot == -1);
    }
    CHECK(slots.num_free() == num_slots);
    CHECK(blocks.num_free() == num_blocks);
    for (auto& seq : seqs) CHECK(seq->num_tokens() == seq->max_total_tokens);
  }
};

}  // namespace

TEST_CASE("state slots under the continuous scheduler: held per sequence, returned by preemption and finishing") {
  SlotRun r;
  std::mt19937 rng(5);
  for (int i = 0; i < 40; ++i) r.add(1 + static_cast<int>(rng() % 40), 1 + static_cast<int>(rng() % 20));
  r.run(SchedulerConfig{Mode::kContinuous, 24, 8, 4}, 24, 5);  // fewer slots than --max-num-seqs
  CHECK(r.preemptions > 0);
}

TEST_CASE("state slots: n > 1 forks take slots with copies, in continuous, sequential and static mode") {
  for (Mode mode : {Mode::kContinuous, Mode::kSequential, Mode::kStatic}) {
    CAPTURE(mode_name(mode));
    SlotRun r;
    r.add(9, 6, 3);
    r.add(5, 4, 2);
    r.add(7, 3);
    r.run(SchedulerConfig{mode, 16, 6, 4}, 64, 4);
    CHECK(r.copies == 3);
  }
}
