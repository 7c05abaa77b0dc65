// The pool of recurrent-state slots beside the paged KV cache. A hybrid model's recurrent layers keep, per
// sequence, a fixed-size state (a convolution window and a recurrent matrix per layer) instead of K/V that
// grows with the sequence: each running sequence holds one slot from admission until it finishes or is
// preempted (recompute: its state is rebuilt from its tokens, so nothing is lost). A model without
// recurrent layers has a pool of 0 slots and nobody holds one.
// A sample forked from a running sequence (n > 1) gets a slot of its own and a pending copy {parent's slot,
// its slot}, which the next step's batch carries (RaggedBatch::state_copies) and the backend runs before
// anything else: a slot's content changes only inside a step, after its copies, so a copy whose source was
// freed and handed out again meanwhile still reads the parent's state. Releasing a slot drops the pending
// copies into it. Invariant: every slot is held or free; at the end of a run num_free() == num_slots().
#pragma once
#include <cstdint>
#include <vector>

namespace cbatch {

class StateSlots {
 public:
  explicit StateSlots(int num_slots);

  int num_slots() const { return num_slots_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  int num_used() const { return num_slots_ - num_free(); }
  bool in_use() const { return num_slots_ > 0; }  // the model has recurrent state

  // A free slot (slot 0 first, then the most recently freed), or -1 when none is free.
  int32_t allocate();
  // Frees a held slot (-1: nothing) and drops the pending copies into it.
  void release(int32_t slot);
  // A slot for a sample forked from the holder of `parent`, with a pending copy of the parent's state into
  // it; -1 (no copy) when none is free.
  int32_t fork(int32_t parent);
  // A pending copy of state slot `src` (a held slot or a snapshot's, state_snapshots.hpp) into `dst`.
  void add_copy(int32_t src, int32_t dst);
  // The pending copies (pairs source, destination), handed to one step and forgotten here.
  std::vector<int32_t> take_copies();

 private:
  int num_slots_;
  std::vector<int32_t> free_;     // free slot ids, the next to hand out at the back
  std::vector<bool> held_;        // (num_slots)
  std::vector<int32_t> copies_;   // (pending copies, 2) source and destination slots
};

}  // namespace cbatch
