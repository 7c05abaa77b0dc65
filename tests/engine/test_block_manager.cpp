#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "engine/core/block_manager.hpp"
#include "engine/base/error.hpp"
#include "engine/model/kv_groups.hpp"

using namespace cbatch;

namespace {

// The only group's table of a one-group manager.
const std::vector<int32_t>& ids(const BlockTables& t) {
  static const std::vector<int32_t> none;
  return t.groups.empty() ? none : t.groups[0];
}

}  // namespace

TEST_CASE("block manager hands out distinct blocks and takes them all back") {
  BlockManager blocks(10, 4);
  BlockTables a, b;
  CHECK(blocks.blocks_for_tokens(0) == 0);
  CHECK(blocks.blocks_for_tokens(4) == 1);
  CHECK(blocks.blocks_for_tokens(5) == 2);
  REQUIRE(blocks.ensure_capacity(a, 9));   // 3 blocks
  REQUIRE(blocks.ensure_capacity(b, 16));  // 4 blocks
  CHECK(a.num_blocks() == 3);
  CHECK(b.num_blocks() == 4);
  CHECK(blocks.num_free() == 3);
  std::set<int32_t> all(ids(a).begin(), ids(a).end());
  all.insert(ids(b).begin(), ids(b).end());
  CHECK(all.size() == 7);
  CHECK(*all.rbegin() < 10);

  SUBCASE("all-or-nothing growth") {
    const auto before = a;
    CHECK_FALSE(blocks.ensure_capacity(a, 9 + 4 * 4));  // needs 4 more, 3 free
    CHECK(ids(a) == ids(before));
    CHECK(blocks.num_free() == 3);
    CHECK(blocks.ensure_capacity(a, 12));  // still 3 blocks: no change
    CHECK(a.num_blocks() == 3);
  }
  blocks.release(a);
  blocks.release(b);
  CHECK(a.empty());
  CHECK(blocks.num_free() == 10);
}

TEST_CASE("block manager rejects an empty pool") {
  CHECK_THROWS_AS(BlockManager(0, 16), Error);
  CHECK_THROWS_AS(BlockManager(4, 0), Error);
}

namespace {

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

}  // namespace

TEST_CASE("prefix cache: registered full blocks are found again, shared by reference, kept while free") {
  BlockManager blocks(10, 4, true);
  std::vector<int32_t> a_tokens = iota_tokens(14, 100);  // blocks [100..103] [104..107] [108..111] + 2 tokens
  BlockTables a, b;
  std::vector<BlockHash> a_hashes, b_hashes;
  REQUIRE(blocks.ensure_capacity(a, 14));
  blocks.commit_full_blocks(a_tokens, 14, a, a_hashes);
  CHECK(a_hashes.size() == 3);
  // B shares A's first 9 tokens: two full blocks match; its own 3rd block differs.
  std::vector<int32_t> b_tokens = iota_tokens(9, 100);
  b_tokens.push_back(7);
  b_tokens.push_back(8);
  CHECK(blocks.match_prefix(b_tokens, static_cast<int>(b_tokens.size()) - 1, b, b_hashes) == 8);
  CHECK(ids(b) == std::vector<int32_t>{ids(a)[0], ids(a)[1]});
  CHECK(blocks.num_used() == 4);  // shared blocks count once
  blocks.release(a, &a_hashes);
  CHECK(a_hashes.empty());
  CHECK(blocks.num_used() == 2);   // B still holds the shared two
  CHECK(blocks.num_cached() == 1);  // A's third full block: free, content kept; its partial 4th block is plain free
  CHECK(blocks.num_free() == 8);
  blocks.release(b, &b_hashes);
  CHECK(blocks.num_cached() == 3);
  CHECK(blocks.num_free() == 10);
  // The last token is never served from the cache: a prompt of exactly 12 tokens matches 2 blocks, not 3.
  BlockTables c;
  std::vector<BlockHash> c_hashes;
  const std::vector<int32_t> c_tokens = iota_tokens(12, 100);
  CHECK(blocks.match_prefix(c_tokens, 11, c, c_hashes) == 8);
  blocks.release(c, &c_hashes);
  // A different first block breaks the chain even when later blocks' tokens are equal.
  std::vector<int32_t> d_tokens = iota_tokens(13, 100);
  d_tokens[0] = 1;
  CHECK(blocks.match_prefix(d_tokens, 12, c, c_hashes) == 0);
  CHECK(c.empty());
}

TEST_CASE("prefix cache: eviction takes uncached blocks first, then the least recently released, never a used one") {
  BlockManager blocks(5, 2, true);
  BlockTables a, b;
  std::vector<BlockHash> ah, bh;
  const std::vector<int32_t> a_tokens = iota_tokens(6, 10), b_tokens = iota_tokens(4, 50);
  REQUIRE(blocks.ensure_capacity(a, 6));
  blocks.commit_full_blocks(a_tokens, 6, a, ah);
  REQUIRE(blocks.ensure_capacity(b, 4));
  blocks.commit_full_blocks(b_tokens, 4, b, bh);
  const std::vector<int32_t> a_blocks = ids(a);
  blocks.release(a, &ah);  // released tail first: a[2], a[1], a[0] from least to most recent
  blocks.release(b, &bh);
  CHECK(blocks.num_cached() == 5);
  BlockTables held;
  std::vector<BlockHash> held_hashes;
  CHECK(blocks.match_prefix(a_tokens, 5, held, held_hashes) == 4);  // holds a[0], a[1]
  BlockTables fresh;
  REQUIRE(blocks.ensure_capacity(fresh, 2));  // evicts a[2], the least recently released
  CHECK(ids(fresh) == std::vector<int32_t>{a_blocks[2]});
  CHECK_FALSE(blocks.ensure_capacity(fresh, 2 * 5));  // a[0], a[1] are held: only b's two blocks are left
  REQUIRE(blocks.ensure_capacity(fresh, 6));
  BlockTables again;
  std::vector<BlockHash> again_hashes;
  CHECK(blocks.match_prefix(b_tokens, 3, again, again_hashes) == 0);  // b's blocks were evicted
  CHECK(ids(held) == std::vector<int32_t>{a_blocks[0], a_blocks[1]});
  blocks.release(held, &held_hashes);
  blocks.release(fresh);
  CHECK(blocks.num_free() == 5);
}

TEST_CASE("prefix cache off: nothing is matched or kept, and chained hashes depend on the parent") {
  BlockManager blocks(4, 2, false);
  BlockTables a, b;
  std::vector<BlockHash> ah, bh;
  const std::vector<int32_t> tokens = iota_tokens(4, 1);
  REQUIRE(blocks.ensure_capacity(a, 4));
  blocks.commit_full_blocks(tokens, 4, a, ah);
  blocks.release(a, &ah);
  CHECK(blocks.num_cached() == 0);
  CHECK(blocks.match_prefix(tokens, 3, b, bh) == 0);
  const BlockHash first = chain_block_hash({}, tokens.data(), 2);
  CHECK_FALSE(chain_block_hash({}, tokens.data() + 2, 2) == chain_block_hash(first, tokens.data() + 2, 2));
}

TEST_CASE("copy-on-write: a shared block gets a private copy before a write, the last holder writes in place") {
  BlockManager blocks(4, 4);
  BlockTables parent;
  REQUIRE(blocks.ensure_capacity(parent, 6));  // 2 blocks, the second holds 2 of its 4 slots
  BlockTables child = parent;
  blocks.share(child);
  CHECK(blocks.num_used() == 2);
  CHECK(blocks.ref_count(ids(parent)[1]) == 2);
  std::vector<int32_t> copies;
  REQUIRE(blocks.ensure_writable(child, 6, copies));  // slot 2 of block 1: copy slots 0-1 along
  CHECK(copies == std::vector<int32_t>{ids(parent)[1], ids(child)[1]});
  CHECK(ids(child)[1] != ids(parent)[1]);
  CHECK(ids(child)[0] == ids(parent)[0]);
  CHECK(blocks.ref_count(ids(parent)[1]) == 1);
  REQUIRE(blocks.ensure_writable(parent, 6, copies));  // now the parent's own: written in place
  CHECK(copies.size() == 2);
  // A shared block written from its first slot needs a block, not a copy; none free: refused, unchanged.
  BlockTables a, b;
  BlockManager small(2, 4);
  REQUIRE(small.ensure_capacity(a, 8));
  b = a;
  small.share(b);
  std::vector<int32_t> none;
  CHECK_FALSE(small.ensure_writable(b, 4, none));
  CHECK(ids(b) == ids(a));
  small.release(a);
  REQUIRE(small.ensure_writable(b, 4, none));  // refcount 1 now: in place
  CHECK(none.empty());
  small.release(b);
  CHECK(small.num_free() == 2);
  blocks.release(parent);
  blocks.release(child);
  CHECK(blocks.num_free() == 4);
}
