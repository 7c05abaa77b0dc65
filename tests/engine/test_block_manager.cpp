#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "engine/core/block_manager.hpp"
#include "engine/core/error.hpp"

using namespace cbatch;

TEST_CASE("block manager hands out distinct blocks and takes them all back") {
  BlockManager blocks(10, 4);
  std::vector<int32_t> a, b;
  CHECK(blocks.blocks_for_tokens(0) == 0);
  CHECK(blocks.blocks_for_tokens(4) == 1);
  CHECK(blocks.blocks_for_tokens(5) == 2);
  REQUIRE(blocks.ensure_capacity(a, 9));   // 3 blocks
  REQUIRE(blocks.ensure_capacity(b, 16));  // 4 blocks
  CHECK(a.size() == 3);
  CHECK(b.size() == 4);
  CHECK(blocks.num_free() == 3);
  std::set<int32_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  CHECK(all.size() == 7);
  CHECK(*all.rbegin() < 10);

  SUBCASE("all-or-nothing growth") {
    const auto before = a;
    CHECK_FALSE(blocks.ensure_capacity(a, 9 + 4 * 4));  // needs 4 more, 3 free
    CHECK(a == before);
    CHECK(blocks.num_free() == 3);
    CHECK(blocks.ensure_capacity(a, 12));  // still 3 blocks: no change
    CHECK(a.size() == 3);
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
