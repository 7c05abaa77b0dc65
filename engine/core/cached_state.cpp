// Prefix caching for a hybrid model's recurrent state (state_snapshots.hpp), the schedulers' shared steps:
// a hit is the longest cached K/V prefix that also has a state snapshot at its end; an admitted sequence plans
// the block boundaries where it saves its state (the end of the K/V blocks it found cached without a snapshot:
// the point where its prompt leaves a shared prefix; and the last full block before its last token), its
// chunks end there, and the state is saved at the end of the step that reaches one.
#include <algorithm>
#include <climits>

#include "engine/core/scheduler.hpp"
#include "engine/core/state_snapshots.hpp"

namespace cbatch {
namespace {

// The prefix-cache name of seq's first num_blocks blocks.
BlockHash chain_hash(const Sequence& seq, int num_blocks, int block_size) {
  BlockHash hash = root_block_hash(seq.request->lora_id);
  for (int i = 0; i < num_blocks; ++i) {
    hash = chain_block_hash(hash, seq.tokens.data() + static_cast<size_t>(i) * block_size, block_size);
  }
  return hash;
}

void plan_snapshots(Sequence& seq, int restored_blocks, int kv_blocks, const BlockHash& kv_hash,
                    const StateSnapshots& snapshots, int block_size) {
  seq.snapshot_points.clear();
  if (kv_blocks > restored_blocks) seq.snapshot_points.push_back({kv_blocks, kv_hash});
  const int last = (seq.num_tokens() - 1) / block_size;
  if (last > std::max(restored_blocks, kv_blocks)) {
    const BlockHash hash = chain_hash(seq, last, block_size);
    if (snapshots.find(hash) < 0) seq.snapshot_points.push_back({last, hash});
  }
}

}  // namespace

int match_snapshot(Sequence& seq, BlockManager& blocks, StateSnapshots& snapshots, int cached) {
  const int block_size = blocks.block_size();
  const int kv_blocks = cached / block_size;
  const BlockHash kv_hash = kv_blocks > 0 ? seq.block_hashes.back() : BlockHash{};
  const BlockHash root = root_block_hash(seq.request->lora_id);
  int k = kv_blocks;
  int32_t snapshot = -1;
  for (;;) {  // the longest K/V hit with a snapshot at its end (a shorter one may lack a windowed group's blocks)
    int j = k;
    while (j > 0 && (snapshot = snapshots.find(seq.block_hashes[static_cast<size_t>(j - 1)])) < 0) --j;
    if (j == k) break;
    blocks.release(seq.block_tables, &seq.block_hashes);
    const int kept = j > 0 ? blocks.match_prefix(seq.tokens, j * block_size, seq.block_tables, seq.block_hashes, root) : 0;
    k = kept / block_size;
  }
  seq.restore_snapshot = k > 0 ? snapshot : -1;
  if (seq.restore_snapshot >= 0) snapshots.pin(seq.restore_snapshot);
  plan_snapshots(seq, k, kv_blocks, kv_hash, snapshots, block_size);
  return k * block_size;
}

bool snapshot_in_flight(const Sequence& seq, const std::vector<Sequence*>& running) {
  if (seq.snapshot_points.empty()) return false;
  const BlockHash& wanted = seq.snapshot_points.front().hash;
  for (const Sequence* other : running) {
    for (const SnapshotPoint& p : other->snapshot_points) {
      if (p.hash == wanted) return true;
    }
  }
  return false;
}

int tokens_to_snapshot(const Sequence& seq, int block_size) {
  if (seq.snapshot_points.empty()) return INT_MAX;
  return seq.snapshot_points.front().num_blocks * block_size - seq.num_computed;
}

void restore_snapshot(Sequence& seq, StateSlots& slots, const StateSnapshots& snapshots, StepPlan& plan) {
  if (seq.restore_snapshot < 0) return;
  slots.add_copy(snapshots.slot_of(seq.restore_snapshot), seq.state_slot);
  plan.restored_snapshots.push_back(seq.restore_snapshot);
  seq.restore_snapshot = -1;
}

void save_snapshots(const StepPlan& plan, const BlockManager& blocks, StateSlots& slots, StateSnapshots& snapshots) {
  const int block_size = blocks.block_size();
  const auto is_cached = [&blocks](const BlockHash& hash) { return blocks.holds_block(hash); };
  for (const int32_t s : plan.restored_snapshots) snapshots.unpin(s);
  for (const ScheduledSeq& s : plan.seqs) {
    std::vector<SnapshotPoint>& points = s.seq->snapshot_points;
    size_t done = 0;
    for (; done < points.size() && points[done].num_blocks * block_size <= s.seq->num_computed; ++done) {
      if (points[done].num_blocks * block_size != s.seq->num_computed || s.seq->state_slot < 0) continue;
      const int32_t snapshot = snapshots.capture(points[done].hash, is_cached);
      if (snapshot >= 0) slots.add_copy(s.seq->state_slot, snapshots.slot_of(snapshot));
    }
    points.erase(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(done));
  }
}

}  // namespace cbatch
