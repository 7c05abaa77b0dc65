// KV groups (kv_groups.hpp) and the block manager with several groups: layers grouped by what they keep, a
// windowed group giving back the blocks that slid out of its window, preemption and the end of a run giving
// back every block, prefix hits that need every group's blocks, copy-on-write in every group.
#include <doctest/doctest.h>

#include <memory>

#include "engine/core/block_manager.hpp"
#include "engine/core/scheduler.hpp"
#include "engine/model/kv_groups.hpp"
#include "engine/model/layer_kinds.hpp"

using namespace cbatch;

namespace {

ModelConfig windowed_config(int num_layers, int global_every, int window) {
  ModelConfig c;
  c.num_layers = num_layers;
  for (int l = 0; l < num_layers; ++l) c.layer_window.push_back((l + 1) % global_every == 0 ? 0 : window);
  return c;
}

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

// Entries of the group's table that are pages; checks that the freed (-1) ones are a prefix.
int held(const BlockTables& t, int group) {
  const std::vector<int32_t>& table = t.groups[static_cast<size_t>(group)];
  int n = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] >= 0) ++n;
    if (i > 0 && table[i - 1] >= 0) CHECK(table[i] >= 0);
  }
  return n;
}

}  // namespace

TEST_CASE("kv groups: layers of each kind split into groups of equal size") {
  SUBCASE("Gemma 3 270M: 15 windowed and 3 full layers -> 6 groups of 3") {
    const KvGroups g = kv_groups(windowed_config(18, 6, 512));
    CHECK(g.layers_per_page == 3);
    CHECK(g.windows() == std::vector<int>{0, 512, 512, 512, 512, 512});
    CHECK(g.groups[0].layers == std::vector<int>{5, 11, 17});
    CHECK(g.groups[1].layers == std::vector<int>{0, 1, 2});
    CHECK(g.groups[2].layers == std::vector<int>{3, 4, 6});
    CHECK(g.layer_group[6] == 2);
    CHECK(g.layer_slot[6] == 2);
    CHECK(g.describe() == "6 groups of 3 layers: 1 full, 5 window 512");
  }
  SUBCASE("4 full and 22 windowed (Gemma 3 1B) -> groups of 2") {
    const KvGroups g = kv_groups(windowed_config(26, 6, 512));
    CHECK(g.layers_per_page == 2);
    CHECK(g.num_groups() == 13);
  }
  SUBCASE("one kind: one group of every layer") {
    ModelConfig c;
    c.num_layers = 4;
    const KvGroups g = kv_groups(c);
    CHECK(g.num_groups() == 1);
    CHECK(g.layers_per_page == 4);
    CHECK(g.windows() == std::vector<int>{0});
  }
  SUBCASE("layers without K/V (recurrent) belong to no group") {
    ModelConfig c;
    c.num_layers = 4;
    c.layer_kinds = {LayerKind::kDeltaNet, LayerKind::kDeltaNet, LayerKind::kDeltaNet, LayerKind::kAttention};
    const KvGroups g = kv_groups(c);
    CHECK(g.num_groups() == 1);
    CHECK(g.layers_per_page == 1);
    CHECK(g.layer_group == std::vector<int>{-1, -1, -1, 0});
    CHECK(g.layer_slot[3] == 0);
  }
  SUBCASE("pages of a sequence: every block of a full group, a windowed group's span") {
    const KvGroups g = kv_groups(windowed_config(18, 6, 512));
    // 8192 tokens, blocks of 16, chunks of 512: 512 full blocks + 5 * (511 + 512 + 15) / 16 + 1 = 5 * 65.
    CHECK(g.pages_for_tokens(8192, 16, 512) == 512 + 5 * 65);
    CHECK(g.pages_for_tokens(100, 16, 512) == 6 * 7);  // shorter than the window: every block everywhere
  }
}

TEST_CASE("kv groups: Gemma 4's shared layers hold no slot, its widths share one page size by padding") {
  // Gemma 4 E2B's shape: 35 layers, every fifth global, the last 15 reading an earlier layer's K/V; local
  // layers 1 K/V head of 256, global ones 1 of 512.
  ModelConfig c;
  c.num_layers = 35;
  c.num_heads = 8;
  c.num_kv_heads = 1;
  c.head_dim = 256;
  c.global_head_dim = 512;
  c.global_kv_heads = 1;
  for (int l = 0; l < 35; ++l) c.layer_window.push_back((l + 1) % 5 == 0 ? 0 : 512);
  c.layer_kv_source = shared_kv_sources(c.layer_window, 35, 15, "key");
  const KvGroups g = kv_groups(c);
  // 20 layers write K/V: 16 local, 4 global -> 5 groups of 4 (1 full, 4 window 512).
  CHECK(g.layers_per_page == 4);
  CHECK(g.describe() == "5 groups of 4 layers: 1 full, 4 window 512");
  CHECK(g.groups[0].layers == std::vector<int>{4, 9, 14, 19});
  int slots_held = 0;
  for (const KvGroup& group : g.groups) {
    for (int l : group.layers) {
      CHECK(c.writes_kv(l));
      ++slots_held;
    }
  }
  CHECK(slots_held == 20);
  // A shared layer: its source's group and slot, no slot of its own.
  for (int l = 20; l < 35; ++l) {
    const int source = c.kv_source(l);
    CHECK(source < 20);
    CHECK(g.layer_group[static_cast<size_t>(l)] == g.layer_group[static_cast<size_t>(source)]);
    CHECK(g.layer_slot[static_cast<size_t>(l)] == g.layer_slot[static_cast<size_t>(source)]);
    CHECK(c.window(l) == c.window(source));
  }
  // Every slot as wide as the widest layer's K/V: 512. A token's K and V (f32) in every group's page:
  // 5 groups * 4 slots * 512 * 2 * 4 bytes = 81920, against 2 * (16 * 256 + 4 * 512) * 4 = 49152 unpadded
  // (the padding is in the 4 windowed groups only, which hold at most their windows' span of blocks).
  CHECK(g.slot_values == 512);
  CHECK(int64_t{g.num_groups()} * g.layers_per_page * g.slot_values * 2 * 4 == 81920);
  CHECK(c.kv_slot_values() * 2 * 4 == 49152);
}

TEST_CASE("block manager: a windowed group gives back the blocks that slid out of its window") {
  // Group 0 full, group 1 a window of 8 keys; blocks of 4 tokens.
  BlockManager blocks(64, 4, false, {0, 8});
  BlockTables seq;
  int most_windowed = 0;
  for (int pos = 0; pos < 64; ++pos) {  // one token a step, as decode does
    REQUIRE(blocks.ensure_capacity(seq, pos + 1));
    most_windowed = std::max(most_windowed, held(seq, 1));
    // Every block a query at pos reads is held: keys pos - 7 .. pos.
    for (int p = std::max(0, pos - 7); p <= pos; ++p) CHECK(seq.groups[1][static_cast<size_t>(p / 4)] >= 0);
    blocks.free_outside_window(seq, pos + 1);
    CHECK(blocks.num_used_in_group(0) == blocks.blocks_for_tokens(pos + 1));
    CHECK(blocks.num_used_in_group(1) == held(seq, 1));
  }
  CHECK(held(seq, 0) == 16);
  CHECK(most_windowed == 3);  // 8 keys span at most 3 blocks of 4
  CHECK(most_windowed <= window_span_blocks(8, 4, 1));
  CHECK(blocks.num_used() == 16 + held(seq, 1));
  blocks.release(seq);
  CHECK(blocks.num_free() == 64);
  CHECK(blocks.num_used_in_group(0) == 0);
  CHECK(blocks.num_used_in_group(1) == 0);
}

TEST_CASE("block manager: a prefix hit needs the full groups' blocks and the windowed groups' last ones") {
  BlockManager blocks(64, 4, true, {0, 8});
  const std::vector<int32_t> tokens = iota_tokens(41, 100);
  BlockTables a;
  std::vector<BlockHash> ah;
  REQUIRE(blocks.ensure_capacity(a, 40));
  blocks.commit_full_blocks(tokens, 40, a, ah);
  blocks.free_outside_window(a, 40);  // slid-out blocks: registered, so cached while free
  CHECK(held(a, 1) == 2);             // keys 33..39 of the next query at 40: blocks 8, 9
  CHECK(blocks.num_cached() == 8);
  const int32_t block_9 = a.groups[1][9];

  BlockTables b;
  std::vector<BlockHash> bh;
  CHECK(blocks.match_prefix(tokens, 40, b, bh) == 40);  // 10 full blocks
  CHECK(held(b, 0) == 10);
  CHECK(b.groups[1][0] == -1);
  CHECK(b.groups[1][9] == block_9);
  CHECK(held(b, 1) == 2);  // the window of a query at 40 needs blocks 8 and 9 only
  CHECK(bh.size() == 10);
  // A shorter prompt hits at 9 blocks: a query at 36 reads keys 29..36, blocks 7 and 8; block 7 slid out of
  // a's window, and its page is still cached.
  BlockTables c;
  std::vector<BlockHash> ch;
  CHECK(blocks.match_prefix(tokens, 37, c, ch) == 36);
  CHECK(held(c, 1) == 2);
  CHECK(c.groups[1][7] >= 0);
  CHECK(a.groups[1][7] == -1);
  blocks.release(b, &bh);
  blocks.release(c, &ch);
  blocks.release(a, &ah);
  CHECK(blocks.num_free() == 64);

  SUBCASE("without the window's blocks the hit is shorter, or none") {
    // Take every free block (evicting the cached ones), then give back only the full group's.
    BlockTables hog;
    REQUIRE(blocks.ensure_capacity(hog, 4 * 32));  // 2 groups x 32 blocks: the whole pool
    blocks.release(hog);
    BlockTables d;
    std::vector<BlockHash> dh;
    CHECK(blocks.match_prefix(tokens, 40, d, dh) == 0);  // evicted: nothing left to hit
    // Fresh: full group cached for 10 blocks, the windowed group only block 9 (8 evicted by hand below).
    BlockTables e;
    std::vector<BlockHash> eh;
    REQUIRE(blocks.ensure_capacity(e, 40));
    blocks.commit_full_blocks(tokens, 40, e, eh);
    const int32_t window_8 = e.groups[1][8];
    blocks.release(e, &eh);
    // Evict exactly window_8: hand out the uncached blocks first, then take cached ones until it goes.
    BlockTables filler;
    while (blocks.num_cached() > 0) {
      REQUIRE(blocks.ensure_capacity(filler, 4 * (filler.num_blocks() + 1)));
      bool gone = false;
      for (const auto& t : filler.groups) gone = gone || std::find(t.begin(), t.end(), window_8) != t.end();
      if (gone) break;
    }
    BlockTables f;
    std::vector<BlockHash> fh;
    const int hit = blocks.match_prefix(tokens, 40, f, fh);
    CHECK(hit < 40);  // block 8 of the window is gone: a hit of 10 blocks cannot be served
    for (int i = blocks.first_needed_block(1, hit); i < hit / 4; ++i) CHECK(f.groups[1][static_cast<size_t>(i)] >= 0);
    blocks.release(f, &fh);
    blocks.release(filler);
    CHECK(blocks.num_free() == 64);
  }
}

TEST_CASE("block manager: copy-on-write and sharing cover every group") {
  BlockManager blocks(16, 4, false, {0, 4});
  BlockTables parent;
  REQUIRE(blocks.ensure_capacity(parent, 10));  // 3 blocks in each group
  blocks.free_outside_window(parent, 10);       // window 4: keys 7..10 need blocks 1, 2
  CHECK(held(parent, 1) == 2);
  BlockTables child = parent;
  blocks.share(child);
  std::vector<int32_t> copies;
  REQUIRE(blocks.ensure_writable(child, 10, copies));
  CHECK(copies.size() == 4);  // block 2 of each group, copied (slot 2 of its 4)
  CHECK(child.groups[0][2] != parent.groups[0][2]);
  CHECK(child.groups[1][2] != parent.groups[1][2]);
  CHECK(child.groups[1][1] == parent.groups[1][1]);
  blocks.release(parent);
  blocks.release(child);
  CHECK(blocks.num_free() == 16);
}

namespace {

struct Workload {
  std::vector<std::unique_ptr<Sequence>> seqs;
  void add(int prompt_len, int max_tokens) {
    auto seq = std::make_unique<Sequence>();
    seq->tokens = iota_tokens(prompt_len, 1 + 1000 * static_cast<int>(seqs.size()));
    seq->num_prompt_tokens = prompt_len;
    seq->max_total_tokens = prompt_len + max_tokens;
    auto request = std::make_shared<Request>();
    request->index = static_cast<int64_t>(seqs.size());
    seq->request = request;
    seqs.push_back(std::move(seq));
  }
};

// Runs the workload to the end, checking each step that every block a scheduled row reads is held; returns
// the preemptions and the most blocks the windowed group held.
std::pair<int, int> run_windowed(Workload& w, Mode mode, int num_blocks) {
  SchedulerConfig config;
  config.mode = mode;
  config.block_size = 4;
  config.max_num_batched_tokens = 16;
  config.max_num_seqs = 4;
  BlockManager blocks(num_blocks, 4, false, {0, 8});
  auto scheduler = make_scheduler(config, blocks);
  for (auto& seq : w.seqs) scheduler->add(seq.get());
  int preemptions = 0, most_windowed = 0, steps = 0;
  while (scheduler->has_work()) {
    REQUIRE(++steps < 10000);
    StepPlan plan = scheduler->schedule();
    REQUIRE_FALSE(plan.empty());
    preemptions += static_cast<int>(plan.preempted.size());
    most_windowed = std::max(most_windowed, blocks.num_used_in_group(1));
    for (const ScheduledSeq& s : plan.seqs) {
      Sequence& seq = *s.seq;
      const int first = std::max(0, seq.num_computed - 7);  // the window of the chunk's first query
      for (int p = first; p < seq.num_computed + s.num_tokens; ++p) {
        CHECK(seq.block_tables.groups[0][static_cast<size_t>(p / 4)] >= 0);
        CHECK(seq.block_tables.groups[1][static_cast<size_t>(p / 4)] >= 0);
      }
      seq.num_computed += s.num_tokens;
      if (!s.samples) continue;
      seq.tokens.push_back(7);
      if (seq.num_tokens() >= seq.max_total_tokens) seq.finish_reason = FinishReason::kLength;
    }
    scheduler->on_step_done(plan);
  }
  CHECK(blocks.num_free() == num_blocks);
  return {preemptions, most_windowed};
}

}  // namespace

TEST_CASE("continuous scheduler with a windowed group: bounded windows, preemption, every block back") {
  Workload w;
  for (int i = 0; i < 4; ++i) w.add(30, 40);  // 70 tokens each: 18 blocks per full table
  SUBCASE("room for all") {
    const auto [preemptions, most_windowed] = run_windowed(w, Mode::kContinuous, 200);
    CHECK(preemptions == 0);
    // Each sequence's window: 7 keys + a chunk of at most 16 -> at most 7 blocks, 4 sequences.
    CHECK(most_windowed <= 4 * window_span_blocks(8, 4, 16));
  }
  SUBCASE("a small pool: preemption recomputes, nothing lost") {
    const auto [preemptions, most_windowed] = run_windowed(w, Mode::kContinuous, 40);
    CHECK(preemptions > 0);
    for (auto& seq : w.seqs) CHECK(seq->num_tokens() == 70);
  }
  SUBCASE("static batching reserves whole tables, and still returns every block") {
    const auto [preemptions, most_windowed] = run_windowed(w, Mode::kStatic, 200);
    CHECK(preemptions == 0);
    CHECK(most_windowed == 4 * 18);
  }
}
