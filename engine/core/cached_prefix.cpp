// The schedulers' shared admission steps for prefix caching (scheduler.hpp).
#include "engine/core/scheduler.hpp"
#include "engine/core/state_snapshots.hpp"

#include <algorithm>

namespace cbatch {

int match_cached_prefix(Sequence& seq, BlockManager& blocks, StateSnapshots* snapshots) {
  if (seq.num_computed != 0 || !seq.block_tables.empty() || seq.request->embedding) return 0;
  // Prompt logprobs need the rows of every prompt position not scored yet: no cached block may cover one.
  const int limit = seq.request->sampling.wants_prompt_logprobs()
                        ? std::min(seq.num_tokens() - 1, seq.num_prompt_logprobs())
                        : seq.num_tokens() - 1;
  const BlockHash root = root_block_hash(seq.request->lora_id);
  int cached = blocks.match_prefix(seq.tokens, limit, seq.block_tables, seq.block_hashes, root);
  if (snapshots != nullptr && blocks.caching()) cached = match_snapshot(seq, blocks, *snapshots, cached);
  seq.num_computed = cached;
  return cached;
}

void unmatch_cached_prefix(Sequence& seq, BlockManager& blocks, StateSnapshots* snapshots) {
  blocks.release(seq.block_tables, &seq.block_hashes);
  seq.num_computed = 0;
  seq.snapshot_points.clear();
  if (snapshots != nullptr && seq.restore_snapshot >= 0) snapshots->unpin(seq.restore_snapshot);
  seq.restore_snapshot = -1;
}

namespace {

const std::vector<BlockHash>& prompt_hashes(Sequence& seq, const BlockManager& blocks) {
  const int num_full = (seq.num_prompt_tokens - 1) / blocks.block_size();
  if (seq.prompt_hashes.empty() && num_full > 0) {
    BlockHash parent = root_block_hash(seq.request->lora_id);
    for (int i = 0; i < num_full; ++i) {
      parent = chain_block_hash(parent, seq.tokens.data() + static_cast<size_t>(i) * blocks.block_size(), blocks.block_size());
      seq.prompt_hashes.push_back(parent);
    }
  }
  return seq.prompt_hashes;
}

}  // namespace

bool prefix_in_flight(Sequence& seq, const std::vector<Sequence*>& running, const BlockManager& blocks) {
  if (!blocks.caching() || seq.request->embedding) return false;
  const size_t missing = static_cast<size_t>(seq.num_computed / blocks.block_size());
  const std::vector<BlockHash>& mine = prompt_hashes(seq, blocks);
  if (missing >= mine.size()) return false;
  for (Sequence* other : running) {
    const std::vector<BlockHash>& theirs = prompt_hashes(*other, blocks);
    if (theirs.size() > missing && other->block_hashes.size() <= missing && theirs[missing] == mine[missing]) return true;
  }
  return false;
}

void note_admitted(Sequence& seq, int cached_tokens, StepPlan& plan) {
  plan.cached_tokens += cached_tokens;
  plan.prefix_hits += cached_tokens > 0;
  if (seq.num_cached_tokens < 0) seq.num_cached_tokens = cached_tokens;
}

}  // namespace cbatch
