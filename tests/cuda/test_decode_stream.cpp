// The stream decode kernel's schedule (decode_stream.hpp), walked on the host the way the kernel walks it:
// every warp's cursor visits exactly its range, every tile of every item is computed once, every item is
// written once (by the warp that holds all of it, or by the merge of its pieces), and no partial slot is
// written twice; and the launcher refuses a plan that does not fit. In the "host" suite: it needs no GPU.
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/decode_stream.hpp"
#include "engine/base/error.hpp"

namespace cbatch::test {

namespace {

using namespace decode_stream;

struct Item {
  int seq, kv_head;
  int64_t begin, end;
};

// The items in tile-list order, straight from the definition.
std::vector<Item> list_items(const std::vector<int32_t>& tile_start, int num_kv_heads) {
  std::vector<Item> items;
  int64_t t = 0;
  for (size_t s = 0; s + 1 < tile_start.size(); ++s) {
    const int n = tile_start[s + 1] - tile_start[s];
    for (int h = 0; h < num_kv_heads; ++h) {
      items.push_back({static_cast<int>(s), h, t, t + n});
      t += n;
    }
  }
  return items;
}

// Walks every warp as the kernel does and checks the invariants of the header comment.
void check_schedule(const std::vector<int32_t>& tile_start, int num_kv_heads, int num_warps) {
  const int num_seqs = static_cast<int>(tile_start.size()) - 1;
  const int64_t num_tiles = static_cast<int64_t>(tile_start.back()) * num_kv_heads;
  const std::vector<Item> items = list_items(tile_start, num_kv_heads);
  std::vector<int> item_of_tile(static_cast<size_t>(num_tiles));
  for (size_t i = 0; i < items.size(); ++i) {
    for (int64_t t = items[i].begin; t < items[i].end; ++t) item_of_tile[static_cast<size_t>(t)] = static_cast<int>(i);
  }
  CAPTURE(num_seqs);
  CAPTURE(num_kv_heads);
  CAPTURE(num_warps);

  std::vector<int> computed(static_cast<size_t>(num_tiles), 0);
  std::vector<int> written(items.size(), 0);
  std::vector<std::pair<int64_t, int64_t>> slots(2 * static_cast<size_t>(num_warps), {-1, -1});
  for (int w = 0; w < num_warps; ++w) {
    const int64_t t0 = warp_begin(w, num_tiles, num_warps);
    const int64_t t1 = warp_begin(w + 1, num_tiles, num_warps);
    REQUIRE(t0 < t1);  // no empty range
    TileCursor c = locate(t0, tile_start.data(), num_seqs, num_kv_heads);
    int64_t piece_begin = t0;
    for (int64_t t = t0; t < t1; ++t) {
      REQUIRE(c.t == t);
      REQUIRE(warp_of(t, num_tiles, num_warps) == w);
      const Item& item = items[static_cast<size_t>(item_of_tile[static_cast<size_t>(t)])];
      REQUIRE(c.seq == item.seq);
      REQUIRE(c.kv_head == item.kv_head);
      REQUIRE(c.item_begin() == item.begin);
      REQUIRE(c.item_end() == item.end);
      REQUIRE(c.tile == t - item.begin);
      ++computed[static_cast<size_t>(t)];
      if (t + 1 == c.item_end() || t + 1 == t1) {
        const int slot = piece_slot(c.item_begin(), c.item_end(), t0, t1, w);
        if (slot < 0) {
          REQUIRE(piece_begin == item.begin);
          REQUIRE(t + 1 == item.end);
          ++written[static_cast<size_t>(item_of_tile[static_cast<size_t>(t)])];
        } else {
          REQUIRE(slots[static_cast<size_t>(slot)].first == -1);  // each slot written once
          slots[static_cast<size_t>(slot)] = {piece_begin, t + 1};
        }
        piece_begin = t + 1;
      }
      if (t + 1 < t1) c.advance(tile_start.data(), num_seqs, num_kv_heads);
    }
  }
  // The merge launch: the pieces of each cut item, in key order, tile it exactly.
  for (int w = 0; w < num_warps; ++w) {
    const int64_t t0 = warp_begin(w, num_tiles, num_warps);
    const int64_t t1 = warp_begin(w + 1, num_tiles, num_warps);
    const TileCursor first = locate(t0, tile_start.data(), num_seqs, num_kv_heads);
    const int w0 = merging_warp_first_piece(first, t0, t1, num_tiles, num_warps);
    if (w0 < 0) continue;
    REQUIRE(w0 < w);
    int64_t next = first.item_begin();
    for (int v = w0; v <= w; ++v) {
      const auto& piece = slots[static_cast<size_t>(v == w0 ? 2 * w0 + 1 : 2 * v)];
      REQUIRE(piece.first == next);
      next = piece.second;
    }
    REQUIRE(next == first.item_end());
    ++written[static_cast<size_t>(item_of_tile[static_cast<size_t>(t0)])];
  }
  for (int64_t t = 0; t < num_tiles; ++t) REQUIRE(computed[static_cast<size_t>(t)] == 1);
  for (size_t i = 0; i < items.size(); ++i) {
    CAPTURE(i);
    REQUIRE(written[i] == 1);
  }
}

std::vector<int32_t> tile_starts_of(const std::vector<int>& keys) {
  std::vector<int32_t> positions, query_start = {0}, decode_seqs;
  for (size_t s = 0; s < keys.size(); ++s) {
    positions.push_back(keys[s] - 1);
    query_start.push_back(static_cast<int32_t>(positions.size()));
    decode_seqs.push_back(static_cast<int32_t>(s));
  }
  std::vector<int32_t> tile_start(keys.size() + 1);
  build_tile_start(positions.data(), query_start.data(), decode_seqs.data(), static_cast<int>(keys.size()),
                   tile_start.data());
  return tile_start;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("decode stream: tile counts per decode sequence") {
    // Sequence 1 of the batch has three rows (a prefill chunk) and is not in the decode list.
    const std::vector<int32_t> positions = {31, 5, 6, 7, 32, 0, 100};
    const std::vector<int32_t> query_start = {0, 1, 4, 5, 6, 7};
    const std::vector<int32_t> decode_seqs = {0, 2, 3, 4};
    std::vector<int32_t> tile_start(5);
    build_tile_start(positions.data(), query_start.data(), decode_seqs.data(), 4, tile_start.data());
    // keys 32 -> 1 tile, 33 -> 2, 1 -> 1, 101 -> 4
    CHECK(tile_start == std::vector<int32_t>{0, 1, 3, 4, 8});
  }

  TEST_CASE("decode stream: a window's tiles start at its first key") {
    const std::vector<int32_t> positions = {31, 100, 0, 700, 63};
    const std::vector<int32_t> query_start = {0, 1, 2, 3, 4, 5};
    const std::vector<int32_t> decode_seqs = {0, 1, 2, 3, 4};
    std::vector<int32_t> tile_start(6);
    build_tile_start(positions.data(), query_start.data(), decode_seqs.data(), 5, tile_start.data(), 64);
    // keys 32 -> 1 tile, 64 (37..100) -> 2, 1 -> 1, 64 (637..700) -> 2, 64 (0..63) -> 2
    CHECK(tile_start == std::vector<int32_t>{0, 1, 3, 4, 6, 8});
    build_tile_start(positions.data(), query_start.data(), decode_seqs.data(), 5, tile_start.data(), 37);
    // keys 32 -> 1, 37 -> 2, 1 -> 1, 37 -> 2, 37 -> 2
    CHECK(tile_start == std::vector<int32_t>{0, 1, 3, 4, 6, 8});
    build_tile_start(positions.data(), query_start.data(), decode_seqs.data(), 5, tile_start.data(), 32);
    CHECK(tile_start == std::vector<int32_t>{0, 1, 2, 3, 4, 5});  // one whole tile each
  }

  TEST_CASE("decode stream: warp counts") {
    CHECK(choose_num_warps(0, 100) == 0);
    CHECK(choose_num_warps(1, 100) == 1);
    CHECK(choose_num_warps(3, 100) == 1);
    CHECK(choose_num_warps(40, 100) == 10);
    CHECK(choose_num_warps(100000, 528) == 528);
    for (int64_t tiles = 1; tiles < 300; ++tiles) {
      for (int warps = 1; warps < 40; ++warps) {
        const int n = choose_num_warps(tiles, warps);
        REQUIRE(n >= 1);
        REQUIRE(n <= warps);
        REQUIRE(n <= tiles);
      }
    }
  }

  TEST_CASE("decode stream: warp ranges partition the tiles and warp_of inverts them") {
    for (int64_t tiles : {1, 2, 7, 64, 1000, 34816}) {
      for (int warps : {1, 2, 3, 5, 64, 528, 1056}) {
        if (warps > tiles) continue;
        CAPTURE(tiles);
        CAPTURE(warps);
        REQUIRE(warp_begin(0, tiles, warps) == 0);
        REQUIRE(warp_begin(warps, tiles, warps) == tiles);
        for (int w = 0; w < warps; ++w) {
          const int64_t t0 = warp_begin(w, tiles, warps), t1 = warp_begin(w + 1, tiles, warps);
          REQUIRE(t0 < t1);
          REQUIRE(warp_of(t0, tiles, warps) == w);
          REQUIRE(warp_of(t1 - 1, tiles, warps) == w);
        }
      }
    }
  }

  TEST_CASE("decode stream: every tile computed once, every item written once") {
    // The decode rows of the GPU attention test (keys 101, 1, 6, 701), every kv head count and warp count.
    const std::vector<int32_t> test_batch = tile_starts_of({101, 1, 6, 701});
    for (int heads = 1; heads <= 8; ++heads) {
      const int64_t tiles = static_cast<int64_t>(test_batch.back()) * heads;
      for (int warps = 1; warps <= tiles; ++warps) check_schedule(test_batch, heads, warps);
    }
    // Random batches: 1..40 sequences of 1..3000 keys, warp counts from 1 to the number of tiles.
    std::mt19937 rng(5);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<int> keys(std::uniform_int_distribution<int>(1, 40)(rng));
      for (int& k : keys) k = std::uniform_int_distribution<int>(1, trial % 2 == 0 ? 3000 : 40)(rng);
      const std::vector<int32_t> tile_start = tile_starts_of(keys);
      const int heads = std::uniform_int_distribution<int>(1, 8)(rng);
      const int64_t tiles = static_cast<int64_t>(tile_start.back()) * heads;
      const int max_warps = std::uniform_int_distribution<int>(1, 1100)(rng);
      check_schedule(tile_start, heads, choose_num_warps(tiles, max_warps));
      check_schedule(tile_start, heads, static_cast<int>(std::min<int64_t>(tiles, 1 + trial)));
    }
  }

  TEST_CASE("decode stream: the launcher refuses a plan that does not fit, before touching the device") {
    const AttentionShape shape{32, 8, 64, 16, 100};
    const DecodeSplit split{1, 1024};
    int32_t dummy = 0;  // never dereferenced: each call below fails its checks before any launch
    auto launch = [&](const DecodeStream* plan, int max_partials, float* partials, const AttentionShape& s) {
      decode_attention<__nv_bfloat16>(nullptr, nullptr, nullptr, nullptr, &dummy, &dummy, &dummy, 8, &dummy, 4, split,
                                      partials, partials, max_partials, s, nullptr, DecodeKernel::kStream, plan);
    };
    // The message of the Error the call throws ("" if none): without a GPU any launch would throw too.
    auto error_of = [](const auto& call) -> std::string {
      try {
        call();
      } catch (const Error& e) {
        return e.what();
      }
      return "";
    };
    auto refused = [&](const DecodeStream* plan, int max_partials, float* partials, const AttentionShape& s) {
      return error_of([&] { launch(plan, max_partials, partials, s); }).find("bad stream plan") != std::string::npos;
    };
    float scratch = 0;
    DecodeStream plan;
    plan.tile_start = &dummy;
    plan.num_tiles = 64;
    CHECK(refused(nullptr, 1024, &scratch, shape));
    plan.num_warps = 0;
    CHECK(refused(&plan, 1024, &scratch, shape));
    plan.num_warps = 65;  // more warps than tiles
    CHECK(refused(&plan, 1024, &scratch, shape));
    plan.num_warps = 16;  // two partial slots a warp: 32 needed
    CHECK(refused(&plan, 31, &scratch, shape));
    CHECK(refused(&plan, 1024, nullptr, shape));
    plan.stages = 4;  // no such build
    CHECK(refused(&plan, 1024, &scratch, shape));
    plan.stages = 3;
    const AttentionShape huge{32, 8, 64, 16, 1 << 25};  // cache rows past int32
    CHECK(refused(&plan, 1024, &scratch, huge));
  }
}

}  // namespace cbatch::test
