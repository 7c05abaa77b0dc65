// Continuous batching (iteration-level scheduling), and sequential mode as its one-sequence case.
//
// Design. Each step has a token budget (max_num_batched_tokens) and a sequence cap (max_num_seqs).
//  1. Running sequences go first, oldest admission first: each gets its next prefill chunk (as many
//     uncomputed tokens as the remaining budget allows) or its one decode token. Chunked prefill falls
//     out of this: a prompt longer than the remaining budget simply takes several steps.
//  2. If a running sequence cannot get the KV block it needs, the most recently admitted running
//     sequence is preempted: its blocks are freed and it goes back to the front of the waiting queue,
//     to be recomputed from its tokens (prompt + generated so far) later. Possibly that is the sequence
//     itself. Older sequences therefore always make progress, so nothing deadlocks.
//  3. Waiting sequences are admitted in arrival order while budget, the sequence cap and free blocks
//     allow, each with a prefill chunk of at most the remaining budget. No admission in a step that
//     preempted (the cache is under pressure). A request with n > 1 counts as n sequences from its
//     admission on (it becomes n samples when its prompt is done); in sequential mode it runs alone.
//     Samples are preempted one by one, like any sequence; a sample about to write into a block it
//     shares with its siblings first gets a private copy (copy-on-write, which can preempt too). With prefix caching, a sequence that starts (or restarts
//     after preemption) first takes the cached blocks of its longest cached block-aligned prefix and
//     starts computing after them; its last token is always computed, so its logits exist. A sequence
//     whose next uncached prompt block a running sequence is computing right now waits (with those
//     behind it) until that block is registered, so a shared prefix is computed once. The sequences of a
//     step use at most max_loras LoRA adapters; waiting ones of other adapters are passed over, in a fair
//     rotation (lora_rotation.hpp).
//  4. An embedding request (prefill only, attention possibly bidirectional) is admitted whole or not at all:
//     its whole prompt in one step, never chunked, never served from or registered in the prefix cache
//     (an encoder's K/V mean nothing to a causal request). When the step's remaining budget is too small
//     it waits at the head of the queue for a later step; the engine rejects one longer than the budget.
//     It finishes in the step that computes it, so its blocks are back at the step's end.
//  5. A hybrid model's recurrent layers keep a state per sequence (state_slots.hpp): admission also needs a
//     free state slot for each sample the sequence will become (its own, and those its running elders'
//     forks will take); a preempted sequence gives its slot back with its blocks, a finished one at the
//     step's end; a forked sample takes a slot and a copy of its parent's state.
//  6. Prefix caching of a hybrid model (state_snapshots.hpp): a hit also needs a state snapshot at its end,
//     restored into the sequence's slot; a sequence's chunks end at its snapshot points, where its state is
//     saved at the step's end. A sequence that would save the same snapshot as a running one (where their
//     prompts leave a shared prefix) waits for it, as for a block in flight.
//  7. KV groups (kv_groups.hpp): a sequence holds a block table per group and every block it needs counts,
//     in every group. At each step's end a running sequence gives back the blocks of its windowed groups
//     that no query from its next position on reads, so a windowed group holds about window + chunk tokens
//     whatever the sequence's length; the pool's free blocks are therefore what admission and preemption see.
// Finished sequences release their blocks in on_step_done(), so their slots are refilled next step; their
// full blocks, like every sequence's as its chunks complete, were registered for reuse first.
#include <algorithm>
#include <cassert>

#include "engine/base/error.hpp"
#include "engine/core/lora_rotation.hpp"
#include "engine/core/scheduler.hpp"

namespace cbatch {
namespace {

class ContinuousScheduler final : public Scheduler {
 public:
  ContinuousScheduler(const SchedulerConfig& config, BlockManager& blocks, StateSlots* slots, StateSnapshots* snapshots)
      : config_(config), blocks_(blocks), slots_(slots),
        snapshots_(snapshots != nullptr && snapshots->in_use() ? snapshots : nullptr), loras_(config.max_loras) {
    if (config.mode == Mode::kSequential) config_.max_num_seqs = 1;
  }

  void add(Sequence* seq) override { waiting_.push_back(seq); }
  void add_forked(Sequence* seq) override {
    seq->admit_order = next_admit_order_++;
    if (has_state()) {
      seq->state_slot = slots_->fork(seq->state_slot);  // the parent's slot until now
      if (seq->state_slot < 0) throw Error("internal error: no state slot for a forked sample");
    }
    running_.push_back(seq);
  }
  int num_waiting() const override { return static_cast<int>(waiting_.size()); }
  int num_running() const override { return static_cast<int>(running_.size()); }

  StepPlan schedule() override {
    StepPlan plan;
    int budget = config_.max_num_batched_tokens;
    schedule_running(plan, budget);
    if (plan.preempted.empty()) admit_waiting(plan, budget);
    if (has_state()) plan.state_copies = slots_->take_copies();
    return plan;
  }

  std::vector<Sequence*> on_step_done(const StepPlan& plan) override {
    std::vector<Sequence*> released;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.seq->request->embedding) continue;
      blocks_.commit_full_blocks(s.seq->tokens, s.seq->num_computed, s.seq->block_tables, s.seq->block_hashes,
                                 root_block_hash(s.seq->request->lora_id));
    }
    if (snapshots_ != nullptr) save_snapshots(plan, blocks_, *slots_, *snapshots_);
    for (Sequence* seq : running_) {  // samples forked this step may finish at their first token
      if (!seq->is_finished()) {
        blocks_.free_outside_window(seq->block_tables, seq->num_computed);  // what its next queries no longer read
        continue;
      }
      blocks_.release(seq->block_tables, &seq->block_hashes);
      release_state(*seq);
      released.push_back(seq);
    }
    std::erase_if(running_, [](const Sequence* seq) { return seq->is_finished(); });
    return released;
  }

 private:
  static ScheduledSeq make_chunk(Sequence* seq, int n) {
    ScheduledSeq s;
    s.seq = seq;
    s.num_tokens = n;
    s.is_prefill = !(n == 1 && seq->num_generated() > 0 && seq->num_uncomputed() == 1);
    s.samples = seq->num_computed + n == seq->num_tokens() && !seq->request->embedding;
    return s;
  }

  void preempt(Sequence* victim, StepPlan& plan) {
    // A copy into a block the victim gives up would be wasted: drop it.
    for (size_t i = 0; i < plan.block_copies.size();) {
      const int32_t dst = plan.block_copies[i + 1];
      const bool victims = std::any_of(victim->block_tables.groups.begin(), victim->block_tables.groups.end(),
                                       [&](const std::vector<int32_t>& t) { return std::find(t.begin(), t.end(), dst) != t.end(); });
      if (victims) {
        plan.block_copies.erase(plan.block_copies.begin() + static_cast<std::ptrdiff_t>(i),
                                plan.block_copies.begin() + static_cast<std::ptrdiff_t>(i + 2));
      } else {
        i += 2;
      }
    }
    blocks_.release(victim->block_tables, &victim->block_hashes);
    release_state(*victim);
    victim->num_computed = 0;
    ++victim->num_preemptions;
    assert(victim == running_.back());
    running_.pop_back();
    waiting_.push_front(victim);
    plan.preempted.push_back(victim);
  }

  void schedule_running(StepPlan& plan, int& budget) {
    size_t i = 0;
    while (i < running_.size() && budget > 0) {
      Sequence* seq = running_[i];
      const int n = chunk_tokens(*seq, budget);
      assert(n > 0);
      bool preempted_self = false;
      while (!blocks_.ensure_writable(seq->block_tables, seq->num_computed, plan.block_copies) ||
             !blocks_.ensure_capacity(seq->block_tables, seq->num_computed + n)) {
        Sequence* victim = running_.back();  // running_ is in admission order
        preempt(victim, plan);
        if (victim == seq) {
          preempted_self = true;
          break;
        }
      }
      if (preempted_self) continue;  // running_[i] is now the next sequence
      plan.seqs.push_back(make_chunk(seq, n));
      budget -= n;
      ++i;
    }
  }

  // In arrival order; a sequence whose LoRA adapter has no slot this step (--max-loras) is passed over,
  // the others go on (lora_rotation.hpp keeps that fair).
  void admit_waiting(StepPlan& plan, int& budget) {
    std::vector<int> running_loras;
    for (const Sequence* s : running_) running_loras.push_back(s->request->lora_id);
    loras_.set_running(running_loras);
    // A waiting adapter without a slot starts the rotation even while the sequence slots are all taken.
    for (const Sequence* s : waiting_) {
      if (loras_.is_blocked(s->request->lora_id)) {
        loras_.note_blocked(s->request->lora_id);
        break;
      }
    }
    size_t i = 0;
    while (budget > 0 && i < waiting_.size() && has_room(*waiting_[i])) {
      Sequence* seq = waiting_[i];
      if (!loras_.may_admit(seq->request->lora_id)) {
        ++i;
        continue;
      }
      const int cached = match_cached_prefix(*seq, blocks_, snapshots_);
      const int n = chunk_tokens(*seq, budget);
      if (seq->request->embedding && n < seq->num_uncomputed()) break;  // whole, in a later step
      if (prefix_in_flight(*seq, running_, blocks_) || snapshot_in_flight(*seq, running_) ||
          !blocks_.ensure_capacity(seq->block_tables, seq->num_computed + n)) {
        unmatch_cached_prefix(*seq, blocks_, snapshots_);
        break;
      }
      note_admitted(*seq, cached, plan);
      if (has_state()) seq->state_slot = slots_->allocate();  // has_room saw enough free
      if (snapshots_ != nullptr) restore_snapshot(*seq, *slots_, *snapshots_, plan);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
      seq->admit_order = next_admit_order_++;
      running_.push_back(seq);
      plan.seqs.push_back(make_chunk(seq, n));
      budget -= n;
    }
  }

  // Sequence slots: a request that will become n samples takes n from its admission on; so do their state
  // slots (a running sequence holds one, its future samples are counted as taken).
  bool has_room(const Sequence& seq) const {
    int slots = 0;
    int forks = 0;
    for (const Sequence* s : running_) slots += s->pending_samples, forks += s->pending_samples - 1;
    const bool state_room = !has_state() || forks + seq.pending_samples <= slots_->num_free();
    if (config_.mode == Mode::kSequential) return running_.empty() && state_room;
    return slots + seq.pending_samples <= config_.max_num_seqs && state_room;
  }

  // The next chunk: what the budget allows of the uncomputed tokens, ending at the next snapshot point.
  int chunk_tokens(const Sequence& seq, int budget) const {
    return std::min({seq.num_uncomputed(), budget, tokens_to_snapshot(seq, blocks_.block_size())});
  }

  bool has_state() const { return slots_ != nullptr && slots_->in_use(); }
  void release_state(Sequence& seq) {
    if (!has_state()) return;
    slots_->release(seq.state_slot);
    seq.state_slot = -1;
  }

  SchedulerConfig config_;
  BlockManager& blocks_;
  StateSlots* slots_;  // nullptr: no recurrent state
  StateSnapshots* snapshots_;  // nullptr: no state snapshots (no recurrent state, or no prefix caching)
  LoraRotation loras_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;   // admission order
  int64_t next_admit_order_ = 0;
};

}  // namespace

std::unique_ptr<Scheduler> make_continuous_scheduler(const SchedulerConfig& config, BlockManager& blocks,
                                                     StateSlots* slots, StateSnapshots* snapshots) {
  return std::make_unique<ContinuousScheduler>(config, blocks, slots, snapshots);
}

}  // namespace cbatch
