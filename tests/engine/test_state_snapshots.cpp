// The recurrent-state snapshot pool (engine/core/state_snapshots.hpp) on its own, and the prefix cache of a hybrid
// model under the continuous and static schedulers with a fake backend whose "state" is a hash of the tokens a
// slot has seen: after every step each sequence's state must be the hash of its computed tokens, whatever was
// restored, forked, preempted or evicted; hits happen, and every block, slot and pin is back at the end.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/core/scheduler.hpp"
#include "engine/core/state_snapshots.hpp"

using namespace cbatch;

namespace {

BlockHash name(uint64_t i) { return BlockHash{i, i * 31 + 7}; }

}  // namespace

TEST_CASE("state snapshots: a backend's reservation beside its running slots is the engine's default split") {
  // The engine's split of `fit` state slots (engine.cpp state_counts): the default share to snapshots, the rest
  // to running sequences up to max_num_seqs, and what they leave to snapshots too.
  for (int running = 1; running <= 300; ++running) {
    const int snapshots = snapshots_beside(running);
    const int64_t fit = running + snapshots;
    const int64_t reserved = default_snapshot_share(fit);
    CHECK(reserved <= snapshots);
    const int64_t slots = std::min<int64_t>(fit - reserved, running);
    CHECK(slots == running);
    CHECK(fit - slots == snapshots);
    CHECK(4 * snapshots >= fit);  // a quarter of the whole at least,
    CHECK(3 * (snapshots - 1) < running);  // and no more than a third of the running slots, rounded up
  }
  CHECK(default_snapshot_share(1) == 0);  // the one slot that fits runs
  CHECK(default_snapshot_share(2) == 0);
  CHECK(default_snapshot_share(8) == 2);
}

TEST_CASE("state snapshots: capture, find, least recently used eviction, pins") {
  StateSnapshots pool(2, 5);
  CHECK(pool.in_use());
  CHECK(pool.slot_of(1) == 6);  // after the 5 running slots
  const int32_t a = pool.capture(name(1));
  const int32_t b = pool.capture(name(2));
  CHECK(a == 0);
  CHECK(b == 1);
  CHECK(pool.capture(name(1)) == -1);  // saved already
  CHECK(pool.find(name(1)) == a);
  CHECK(pool.find(BlockHash{1, 0}) == -1);  // the same low half is not the same name
  CHECK(pool.num_free() == 0);
  pool.pin(a);                              // also the most recently used now: b goes first
  const int32_t c = pool.capture(name(3));
  CHECK(c == b);
  CHECK(pool.find(name(2)) == -1);
  CHECK(pool.num_evictions() == 1);
  pool.pin(c);
  CHECK(pool.capture(name(4)) == -1);       // every snapshot pinned: none to give
  CHECK(pool.num_pinned() == 2);
  pool.unpin(a);
  pool.unpin(c);
  CHECK_THROWS_AS(pool.unpin(c), Error);
  CHECK(pool.capture(name(4)) == a);        // a was used before c
  CHECK(pool.num_registered() == 2);
  CHECK(pool.num_saved() == 4);
  CHECK_THROWS_AS(pool.pin(7), Error);
  CHECK_FALSE(StateSnapshots(0, 3).in_use());
}

TEST_CASE("state snapshots: one whose K/V blocks are gone is evicted before the least recently used") {
  StateSnapshots pool(3, 0);
  for (uint64_t i = 1; i <= 3; ++i) CHECK(pool.capture(name(i)) == static_cast<int32_t>(i - 1));
  const auto gone = [](const BlockHash& h) { return !(h == name(2)) && !(h == name(3)); };  // 2 and 3 evicted
  CHECK(pool.capture(name(4), gone) == 1);  // 2, not the least recently used 1
  CHECK(pool.find(name(1)) == 0);
  pool.pin(2);
  CHECK(pool.capture(name(5), gone) == 0);  // 3 is pinned: the least recently used then
  pool.unpin(2);
}

namespace {

uint64_t fold(uint64_t state, int32_t token) { return (state ^ static_cast<uint64_t>(token)) * 0x100000001b3ULL + 1; }

// A fake engine and backend: each state slot (running or snapshot) holds the hash of the tokens it has seen.
struct SnapshotRun {
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<uint64_t> state;  // (running slots + snapshots)
  int preemptions = 0;
  int64_t cached = 0;
  int hits = 0;

  void add(std::vector<int32_t> prompt, int max_tokens, int n = 1) {
    auto seq = std::make_unique<Sequence>();
    seq->num_prompt_tokens = static_cast<int>(prompt.size());
    seq->tokens = std::move(prompt);
    seq->max_total_tokens = seq->num_prompt_tokens + max_tokens;
    seq->pending_samples = n;
    auto request = std::make_shared<Request>();
    request->sampling.n = n;
    seq->request = request;
    seqs.push_back(std::move(seq));
  }

  // The backend's step: copies in order, a zero state for a sequence that starts, then each real row.
  void forward(const StepPlan& plan) {
    for (size_t i = 0; i < plan.state_copies.size(); i += 2) {
      state.at(static_cast<size_t>(plan.state_copies[i + 1])) = state.at(static_cast<size_t>(plan.state_copies[i]));
    }
    for (const ScheduledSeq& s : plan.seqs) {
      const Sequence& seq = *s.seq;
      if (s.num_tokens == 0) continue;
      uint64_t& st = state.at(static_cast<size_t>(seq.state_slot));
      if (seq.num_computed == 0) st = 0;
      for (int p = seq.num_computed; p < seq.num_computed + s.num_tokens; ++p) st = fold(st, seq.tokens[p]);
    }
  }

  void commit(const StepPlan& plan, Scheduler& scheduler, BlockManager& blocks) {
    std::vector<std::unique_ptr<Sequence>> children;
    for (const ScheduledSeq& s : plan.seqs) {
      Sequence& seq = *s.seq;
      seq.num_computed += s.num_tokens;
      uint64_t want = 0;
      for (int p = 0; p < seq.num_computed; ++p) want = fold(want, seq.tokens[p]);
      CHECK(state.at(static_cast<size_t>(seq.state_slot)) == want);  // a wrong restore shows here
      if (!s.samples) continue;
      for (int i = 1; i < seq.pending_samples; ++i) children.push_back(std::make_unique<Sequence>(seq));
      seq.pending_samples = 1;
      seq.tokens.push_back(static_cast<int32_t>(seq.tokens.size() % 5));
      if (seq.num_tokens() >= seq.max_total_tokens) seq.finish_reason = FinishReason::kLength;
    }
    for (auto& child : children) {
      child->pending_samples = 1;
      child->tokens.push_back(static_cast<int32_t>(child->tokens.size() % 5));
      if (child->num_tokens() >= child->max_total_tokens) child->finish_reason = FinishReason::kLength;
      blocks.share(child->block_tables);
      scheduler.add_forked(child.get());
      seqs.push_back(std::move(child));
    }
  }

  void run(const SchedulerConfig& config, int num_blocks, int num_slots, int num_snapshots) {
    BlockManager blocks(num_blocks, config.block_size, true);
    StateSlots slots(num_slots);
    StateSnapshots snapshots(num_snapshots, num_slots);
    state.assign(static_cast<size_t>(num_slots + num_snapshots), 0);
    auto scheduler = make_scheduler(config, blocks, &slots, &snapshots);
    for (auto& seq : seqs) scheduler->add(seq.get());
    for (int step = 0; scheduler->has_work(); ++step) {
      REQUIRE(step < 100000);
      const StepPlan plan = scheduler->schedule();
      REQUIRE_FALSE(plan.empty());
      forward(plan);
      cached += plan.cached_tokens;
      hits += plan.prefix_hits;
      preemptions += static_cast<int>(plan.preempted.size());
      // The step's restores pin their snapshots until its end, and nothing else is pinned.
      const std::set<int32_t> restored(plan.restored_snapshots.begin(), plan.restored_snapshots.end());
      CHECK(snapshots.num_pinned() == static_cast<int>(restored.size()));
      commit(plan, *scheduler, blocks);
      scheduler->on_step_done(plan);
    }
    CHECK(slots.num_free() == num_slots);
    CHECK(blocks.num_free() == num_blocks);
    CHECK(snapshots.num_pinned() == 0);
    CHECK(snapshots.num_free() + snapshots.num_registered() == num_snapshots);
    for (auto& seq : seqs) CHECK(seq->num_tokens() == seq->max_total_tokens);
  }
};

// A prompt of the prefix's first tokens, then num prompts of a shared prefix (prefix_len tokens) and random
// suffixes; every third one of another prefix.
void add_shared(SnapshotRun& r, int num, int prefix_len, int n = 1) {
  std::mt19937 rng(11);
  std::vector<int32_t> prefix[2];
  for (auto& p : prefix) for (int i = 0; i < prefix_len; ++i) p.push_back(10 + static_cast<int32_t>(rng() % 90));
  // First a prompt that ends inside the prefix: its snapshot lies a block or so before the prefix's last whole block.
  r.add(std::vector<int32_t>(prefix[0].begin(), prefix[0].end() - 3), 2, n);
  for (int i = 0; i < num; ++i) {
    std::vector<int32_t> prompt = prefix[i % 3 == 2];
    for (int k = 1 + static_cast<int>(rng() % 11); k > 0; --k) prompt.push_back(10 + static_cast<int32_t>(rng() % 90));
    r.add(prompt, 1 + static_cast<int>(rng() % 6), n);
  }
}

}  // namespace

TEST_CASE("hybrid prefix cache: restored states are the prefix's, in every mode") {
  for (Mode mode : {Mode::kContinuous, Mode::kSequential, Mode::kStatic}) {
    CAPTURE(mode_name(mode));
    SnapshotRun r;
    add_shared(r, 12, 21);
    r.run(SchedulerConfig{mode, 32, 4, 4}, 256, 4, 16);
    CHECK(r.hits >= 4);
    CHECK(r.cached >= 4 * 20);
  }
}

TEST_CASE("hybrid prefix cache: preemption, n > 1 forks and a snapshot pool of 1") {
  SnapshotRun r;
  add_shared(r, 16, 21, 2);
  r.run(SchedulerConfig{Mode::kContinuous, 12, 6, 4}, 22, 6, 1);
  CHECK(r.preemptions > 0);
  CHECK(r.hits > 0);
  SnapshotRun tight;
  add_shared(tight, 16, 21);
  tight.run(SchedulerConfig{Mode::kContinuous, 64, 8, 4}, 256, 8, 1);
  CHECK(tight.hits > 0);
}
