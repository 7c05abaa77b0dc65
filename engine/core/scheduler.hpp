// Schedulers decide, step by step, which sequences run and with how many tokens. Continuous batching
// (also used, with one sequence, for sequential mode) and classic static batching share this interface
// so the engine loop is the same for every mode.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "engine/core/block_manager.hpp"
#include "engine/core/engine_config.hpp"
#include "engine/core/state_slots.hpp"
#include "engine/core/state_snapshots.hpp"
#include "engine/core/step_plan.hpp"

namespace cbatch {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Queues a new sequence (its prompt in tokens, nothing computed, no blocks).
  virtual void add(Sequence* seq) = 0;
  // A sample forked from a running sequence at this step's end (n > 1): it runs from the next step on,
  // holding references to its parent's blocks.
  virtual void add_forked(Sequence* seq) = 0;
  virtual StepPlan schedule() = 0;
  // The engine calls this after the step's tokens are appended and stop conditions checked; finished
  // sequences leave the batch (continuous) or hold their slot until the batch ends (static). Returns the
  // sequences the scheduler no longer references (their blocks freed): the engine may delete them.
  virtual std::vector<Sequence*> on_step_done(const StepPlan& plan) = 0;
  virtual int num_waiting() const = 0;
  virtual int num_running() const = 0;
  bool has_work() const { return num_waiting() + num_running() > 0; }
};

// `slots`: the recurrent-state slots of a hybrid model (each running sequence holds one; admission needs
// one per sample the sequence will become); nullptr or an empty pool for a model without recurrent layers.
// `snapshots`: with prefix caching, the hybrid model's state snapshots (nullptr: none).
std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& config, BlockManager& blocks,
                                          StateSlots* slots = nullptr, StateSnapshots* snapshots = nullptr);

// Admission with prefix caching (cached_prefix.cpp): a sequence with nothing computed takes the cached
// blocks of its longest cached prefix (its last token excluded) and counts them as computed; returns the
// tokens they hold. unmatch_ gives them back when the admission fails after all; note_admitted counts
// them in the plan and, at a sequence's first admission, as its cached prompt tokens.
// With `snapshots` (a hybrid model), the hit is cut to the longest prefix with a state snapshot at its end
// (match_snapshot), and the sequence's snapshot points are planned.
int match_cached_prefix(Sequence& seq, BlockManager& blocks, StateSnapshots* snapshots = nullptr);
void unmatch_cached_prefix(Sequence& seq, BlockManager& blocks, StateSnapshots* snapshots = nullptr);
void note_admitted(Sequence& seq, int cached_tokens, StepPlan& plan);
// Whether the first block of seq's prompt that the cache lacks is being computed by one of `running` (a
// block of its own prompt, same content, not yet registered): then seq should wait a step or two and take
// it from the cache instead of computing it again.
bool prefix_in_flight(Sequence& seq, const std::vector<Sequence*>& running, const BlockManager& blocks);

// A hybrid model's state snapshots (cached_state.cpp). match_snapshot: of the `cached` tokens the K/V match
// gave seq, the longest block-aligned prefix with a snapshot at its end (the rest of the blocks given back),
// that snapshot pinned as seq.restore_snapshot; plans seq.snapshot_points; returns the tokens kept.
int match_snapshot(Sequence& seq, BlockManager& blocks, StateSnapshots& snapshots, int cached);
// Whether a running sequence is about to save the snapshot seq would save first (where its prompt leaves the
// cached prefix): then seq waits and restores it instead of computing the prefix again.
bool snapshot_in_flight(const Sequence& seq, const std::vector<Sequence*>& running);
// Tokens seq may compute before its next snapshot point (a chunk ends there); INT_MAX without one.
int tokens_to_snapshot(const Sequence& seq, int block_size);
// At admission, with its slot held: the copy of its pinned snapshot into its slot (the step's state copies).
void restore_snapshot(Sequence& seq, StateSlots& slots, const StateSnapshots& snapshots, StepPlan& plan);
// At the step's end: unpins the step's restored snapshots and saves the state of every sequence whose
// computed tokens end at its next snapshot point (a copy of its slot run first thing next step).
void save_snapshots(const StepPlan& plan, const BlockManager& blocks, StateSlots& slots, StateSnapshots& snapshots);

}  // namespace cbatch
