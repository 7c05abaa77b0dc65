// The pool of recurrent-state snapshots that lets a hybrid model use the prefix cache. A snapshot is a copy
// of a sequence's state slot (same bytes) taken when the sequence's computed tokens end at a block boundary,
// named by the prefix-cache hash of the block that ends there (block_manager.hpp: the hash covers the whole
// prefix and its LoRA adapter). A later sequence whose prompt has that prefix's K/V blocks cached and a
// snapshot at their end restores it into its own slot and skips the prefix. Snapshots live in the backend's
// state memory beside the running slots: snapshot i is backend slot first_slot + i, so saving and restoring
// are the step's state copies (RaggedBatch::state_copies, run in order before the step's layers).
// When a new snapshot is needed, a registered one whose K/V blocks the block cache has evicted goes first (no
// hit can use it), then the least recently used; a pinned one (a sequence admitted this step restores it)
// never goes. Invariant: each snapshot is free or registered under
// one hash; at the end of a run none is pinned.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/core/block_manager.hpp"

namespace cbatch {

// How many of the state slots that fit (`fit`) hold snapshots when --state-snapshots is not given: a quarter,
// leaving at least one to run. The engine's split (state_counts) gives the rest to running sequences, up to
// --max-num-seqs, and any slots past that to snapshots too.
int64_t default_snapshot_share(int64_t fit);

// The snapshots a backend that sizes its state memory for `running` slots (CUDA: --max-num-seqs) reserves
// beside them when --state-snapshots is not given: a third of `running`, rounded up, so that they are at least
// a quarter of the whole, and the engine's split of the whole gives back `running` slots and these snapshots.
int snapshots_beside(int running);

class StateSnapshots {
 public:
  StateSnapshots(int num_snapshots, int first_slot);

  int num_snapshots() const { return num_snapshots_; }
  bool in_use() const { return num_snapshots_ > 0; }
  int num_registered() const { return static_cast<int>(by_hash_.size()); }
  int num_free() const { return static_cast<int>(free_.size()); }
  int num_pinned() const;
  int64_t num_evictions() const { return num_evictions_; }
  int64_t num_saved() const { return num_saved_; }  // captures so far
  int32_t slot_of(int32_t snapshot) const { return first_slot_ + snapshot; }  // its backend state slot

  // The snapshot registered under `hash` (the prefix ending at a block boundary), or -1.
  int32_t find(const BlockHash& hash) const;
  // A snapshot to save a state into under `hash`: a free one, else an unpinned one evicted: the least recently
  // used of those whose prefix `is_cached` says is gone, else the least recently used; -1 when `hash` is
  // registered already or every snapshot is pinned.
  int32_t capture(const BlockHash& hash, const std::function<bool(const BlockHash&)>& is_cached = {});
  // A sequence about to restore `snapshot` holds it (it is marked most recently used); unpin lets it go.
  void pin(int32_t snapshot);
  void unpin(int32_t snapshot);

 private:
  void touch(int32_t snapshot);

  int num_snapshots_;
  int first_slot_;
  std::vector<int32_t> free_;                          // free snapshots, the next to hand out at the back
  std::list<int32_t> lru_;                             // registered snapshots, least recently used first
  std::vector<std::list<int32_t>::iterator> lru_pos_;  // (num_snapshots) valid while registered
  std::vector<BlockHash> hash_;                        // (num_snapshots) the name of a registered one
  std::vector<int32_t> pins_;                          // (num_snapshots)
  std::unordered_map<uint64_t, int32_t> by_hash_;      // hash.lo -> registered snapshot
  int64_t num_evictions_ = 0;
  int64_t num_saved_ = 0;
};

}  // namespace cbatch
