// The CUDA-core attention kernels' block code (paged_attention_block.cuh: the kernel over attention tiles
// that serves fp32, CBATCH_PREFILL_ATTENTION=0 and head_dim 256; decode_cuda_cores_block.cuh: the CUDA-core
// decode kernel and the merge of split-KV partials) run on the CPU by the block emulator, against the CPU
// reference on the attention tests' batch (attention_case.hpp): every row through the tiles, the decode rows
// through the decode kernel with one split and with 128-key splits merged by the merge block. Llama's builds
// and the family builds (windows that cut key tiles and splits, softcaps, query scales; the cache before
// every window NaN, so a kernel that loads a key it need not read fails; attention sinks), head_dim 16 to
// 256; and both kernels' FP8 builds over an FP8 cache (E4M3 codes and scales) against the reference on its dequantized
// values; head_dim 512 (Gemma 4's global layers) on the tile kernel, and Gemma 4's pairs of layers of their own
// shapes in one cache slot (check_gemma4_pair). The device helpers (cuda_dtype.cuh) are compiled as host code
// after the emulator. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <vector>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "tests/cuda/attention_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it (where threadIdx.x is
// unsigned, as on a GPU, and compared with ints).
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/attention/decode_cuda_cores_block.cuh"
#include "cuda/attention/paged_attention_block.cuh"

namespace cbatch::test {
namespace {

using decode_detail::DecodeArgs;

// Shared memory of one emulated block, 128-byte aligned as the kernels declare theirs.
struct BlockMemory {
  struct Free {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(128)); }
  };
  std::unique_ptr<unsigned char[], Free> bytes;
  explicit BlockMemory(size_t n) : bytes(static_cast<unsigned char*>(::operator new[](n, std::align_val_t(128)))) {}
};

// The case's inputs in T (its cache in KV, of cache_heads heads' room a block where set) and the output
// poisoned.
template <typename T, typename KV = T>
struct HostInputs {
  const AttentionCase& c;
  std::vector<T> qkv;
  std::vector<KV> k, v;
  std::vector<T> out;
  explicit HostInputs(const AttentionCase& ca, int cache_heads = 0)
      : c(ca), qkv(to_t<T>(ca.qkv)), k(widen_cache(cache_elements<T, KV>(ca, true), ca, cache_heads)),
        v(widen_cache(cache_elements<T, KV>(ca, false), ca, cache_heads)),
        out(static_cast<size_t>(ca.num_rows()) * ca.q_dim(), from_f32<T>(NAN)) {}

  // The output of `rows` (every row when empty) against the reference.
  double error(const std::vector<int>& rows = {}) const {
    std::vector<float> got;
    std::vector<double> want;
    for (int r = 0; r < c.num_rows(); ++r) {
      if (!rows.empty() && std::find(rows.begin(), rows.end(), r) == rows.end()) continue;
      for (int i = 0; i < c.q_dim(); ++i) {
        got.push_back(to_f32(out[static_cast<size_t>(r) * c.q_dim() + i]));
        want.push_back(c.ref[static_cast<size_t>(r) * c.q_dim() + i]);
      }
    }
    return rel_error(got, want);
  }
};

// Every row (decode rows too, a tile each) through paged_attention_block over the case's attention tiles, in a
// cache of cache_heads heads' room a block and tiles of tile_rows rows where set (a tile list cut for another
// layer's shape: its items cut into slices along grid z, as paged_attention launches them).
template <typename T, int HD, bool FAMILY, typename KV>
void check_paged(const AttentionCase& c, int cache_heads = 0, int tile_rows = 0) {
  HostInputs<T, KV> h(c, cache_heads);
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, c.block_size, c.num_blocks, cache_heads,
                             tile_rows};
  const int rows_per_tile = paged_attention_rows_per_tile(shape);
  const int slices = attention_tile_slices(shape, paged_attention_detail::items_per_cta<HD>());
  CAPTURE(rows_per_tile);
  CAPTURE(slices);
  std::vector<int32_t> tile_seq(static_cast<size_t>(c.num_rows())), tile_row(tile_seq.size());
  const int num_tiles = build_attention_tiles(c.query_start.data(), static_cast<int>(c.seqs.size()), rows_per_tile,
                                              tile_seq.data(), tile_row.data());
  const TileAttentionArgs<T, KV> a{h.out.data(), h.qkv.data(), h.k.data(), h.v.data(), c.positions.data(),
                                   c.query_start.data(), c.tables.data(), tile_seq.data(), tile_row.data(),
                                   c.max_blocks, c.num_heads, c.num_kv_heads, c.block_size, rows_per_tile,
                                   c.scoring.scale_for(HD), c.scoring.softcap, c.scoring.window,
                                   case_kv_scale<KV>(c, true), case_kv_scale<KV>(c, false), c.host_sinks(),
                                   cache_heads};
  BlockMemory smem(paged_attention_detail::smem_bytes<HD>());
  block_emulator::launch({static_cast<unsigned>(num_tiles), static_cast<unsigned>(c.num_kv_heads),
                          static_cast<unsigned>(slices)},
                         paged_attention_detail::kThreads, [&] {
                           paged_attention_detail::paged_attention_block<T, HD, FAMILY, KV>(
                               a, reinterpret_cast<float*>(smem.bytes.get()));
                         });
  CHECK(h.error() < tolerance<T>());
}

// The decode rows through the CUDA-core decode block, with one split and with 128-key splits merged by the
// merge block.
template <typename T, int HD, bool FAMILY, typename KV>
void check_decode(const AttentionCase& c, int cache_heads = 0) {
  HostInputs<T, KV> h(c, cache_heads);
  const int group = c.num_heads / c.num_kv_heads;
  const int num_decode = static_cast<int>(c.decode_seqs.size());
  std::vector<int> decode_rows;
  int max_keys = 0;
  for (int s : c.decode_seqs) {
    const int pos = c.positions[c.query_start[s]];
    decode_rows.push_back(c.query_start[s]);
    max_keys = std::max(max_keys, pos + 1 - window_first_key(pos, c.scoring.window));
  }
  for (const int keys_per_split : {1 << 20, kDecodeKeysPerChunk}) {
    const int splits = (max_keys + keys_per_split - 1) / keys_per_split;
    CAPTURE(splits);
    const size_t partials = static_cast<size_t>(num_decode) * c.num_kv_heads * splits;
    std::vector<float> partial_o(partials * group * HD, NAN), partial_ml(partials * group * 2, NAN);
    std::fill(h.out.begin(), h.out.end(), from_f32<T>(NAN));
    const DecodeArgs<T, KV> a{h.out.data(), h.qkv.data(), h.k.data(), h.v.data(), c.positions.data(),
                              c.query_start.data(), c.tables.data(), c.decode_seqs.data(), partial_o.data(),
                              partial_ml.data(), c.max_blocks, c.num_heads, c.num_kv_heads, c.block_size,
                              keys_per_split, c.scoring.scale_for(HD), c.scoring.softcap, c.scoring.window,
                              case_kv_scale<KV>(c, true), case_kv_scale<KV>(c, false), c.host_sinks(),
                              cache_heads};
    BlockMemory smem(decode_detail::cuda_cores::decode_smem_bytes<KV, HD>());
    block_emulator::launch(
        {static_cast<unsigned>(num_decode), static_cast<unsigned>(c.num_kv_heads), static_cast<unsigned>(splits)},
        decode_detail::cuda_cores::kThreads,
        [&] { decode_detail::cuda_cores::cuda_cores_block<T, HD, FAMILY, KV>(a, smem.bytes.get()); });
    if (splits > 1) {
      block_emulator::launch({static_cast<unsigned>(num_decode), static_cast<unsigned>(c.num_heads), 1}, HD,
                             [&] { decode_detail::cuda_cores::combine_block(a, splits); });
    }
    CHECK(h.error(decode_rows) < tolerance<T>());
  }
}

template <typename F>
void with_head_dim(int hd, F&& f) {
  switch (hd) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    case 48: return f(std::integral_constant<int, 48>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    case 256: return f(std::integral_constant<int, 256>{});
    case 512: return f(std::integral_constant<int, 512>{});
    default: FAIL("no CUDA-core build for head_dim " << hd);
  }
}

// Both kernels' FAMILY build on every shape (the decode kernel where it has the head_dim), over a cache of
// KV elements (an FP8 one: the reference sees its dequantized values); sinks: with attention sinks.
template <typename T, bool FAMILY, typename KV = T>
void check_cuda_core_kernels(std::initializer_list<CaseShape> shapes, const AttentionScoring& scoring = {},
                             bool sinks = false) {
  CAPTURE(scoring.window);
  CAPTURE(scoring.softcap);
  CAPTURE(scoring.scale);
  CAPTURE(sinks);
  const std::optional<Fp8KvScales> fp8 = kFp8Kv<KV> ? std::optional<Fp8KvScales>(Fp8KvScales{}) : std::nullopt;
  for_each_case_shape(shapes, [&](int head_dim, int num_heads, int num_kv_heads, int block_size) {
    const AttentionCase c =
        make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size, mixed_batch(), scoring, fp8, sinks);
    with_head_dim(head_dim, [&](auto hd) {
      constexpr int HD = decltype(hd)::value;
      check_paged<T, HD, FAMILY, KV>(c);
      if constexpr (HD != 48 && HD <= 256) check_decode<T, HD, FAMILY, KV>(c);  // 512: the tile kernel's
    });
  });
}

const AttentionScoring kFamilyScorings[] = {{0.0f, 0.0f, 37}, {0.0f, 0.0f, 300}, {0.3f, 2.0f, 0}, {0.0625f, 2.0f, 64}};

// A Gemma 4 pair of layers as the CUDA backend runs them (cuda_forward.hpp: layer_shape): a sliding layer of
// head 256 over `sliding_kv` kv heads (its window 37: the family build) and a global one of head 512 over
// `global_kv` (no window), both in one cache slot as wide as the wider of the two (each layer's cache_heads),
// the tile list cut for the sliding layer's GQA group (the global one's tiles then hold more items than a CTA:
// slices along grid z); the global layer's decode rows go through the tile kernel, the sliding one's through
// the decode kernel too.
template <typename T, typename KV = T>
void check_gemma4_pair(int num_heads, int sliding_kv, int global_kv) {
  CAPTURE(num_heads);
  CAPTURE(sliding_kv);
  CAPTURE(global_kv);
  const int slot_values = std::max(sliding_kv * 256, global_kv * 512);
  const std::optional<Fp8KvScales> fp8 = kFp8Kv<KV> ? std::optional<Fp8KvScales>(Fp8KvScales{}) : std::nullopt;
  for (int block_size : {16, 5}) {
    CAPTURE(block_size);
    const AttentionScoring window{0.0f, 0.0f, 37};
    const AttentionCase sliding =
        make_attention_case<T>(256, num_heads, sliding_kv, block_size, mixed_batch(), window, fp8);
    const AttentionCase global = make_attention_case<T>(512, num_heads, global_kv, block_size, mixed_batch(), {}, fp8);
    const int tile_rows = paged_attention_rows_per_tile(AttentionShape{num_heads, sliding_kv, 256, block_size, 0});
    check_paged<T, 256, true, KV>(sliding, slot_values / 256, tile_rows);
    check_decode<T, 256, true, KV>(sliding, slot_values / 256);
    check_paged<T, 512, false, KV>(global, slot_values / 512, tile_rows);
  }
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE_TEMPLATE("the CUDA-core attention kernels' block code matches the reference (emulated)", T, float,
                     __nv_bfloat16, __half) {
    check_cuda_core_kernels<T, false>({{64, 6, 2}, {128, 8, 2}, {16, 4, 4}, {48, 8, 1}, {256, 8, 4}});
  }

  TEST_CASE_TEMPLATE("the CUDA-core attention kernels' family builds: windows, softcaps, scales (emulated)", T, float,
                     __nv_bfloat16) {
    for (const AttentionScoring& scoring : kFamilyScorings) {
      check_cuda_core_kernels<T, true>({{64, 6, 2}, {32, 8, 8}, {256, 2, 1}}, scoring);
    }
  }

  TEST_CASE_TEMPLATE("the CUDA-core attention kernels' family builds with attention sinks (emulated)", T, float,
                     __nv_bfloat16) {
    check_cuda_core_kernels<T, true>({{64, 8, 1}, {64, 6, 2}, {16, 4, 4}, {256, 2, 1}}, {}, true);
    for (const AttentionScoring& scoring : kFamilyScorings) {
      check_cuda_core_kernels<T, true>({{64, 8, 1}, {32, 8, 8}}, scoring, true);
    }
    if constexpr (!std::is_same_v<T, float>) {
      check_cuda_core_kernels<T, true, Fp8E4M3>({{64, 8, 2}}, kFamilyScorings[0], true);
    }
  }

  TEST_CASE_TEMPLATE("the CUDA-core tile kernel at head_dim 512 (Gemma 4's global layers) matches the reference, "
                     "Llama's and the family builds (emulated)", T, float, __nv_bfloat16, __half) {
    check_cuda_core_kernels<T, false>({{512, 8, 2}, {512, 2, 2}});
    check_cuda_core_kernels<T, true>({{512, 4, 1}}, kFamilyScorings[0]);
    check_cuda_core_kernels<T, true>({{512, 4, 1}}, kFamilyScorings[3], true);
    if constexpr (!std::is_same_v<T, float>) check_cuda_core_kernels<T, false, Fp8E4M3>({{512, 8, 2}});
  }

  TEST_CASE_TEMPLATE("Gemma 4's attention shapes in one cache slot: sliding 256 and global 512, their own K/V heads "
                     "and the tile list of the sliding layer (emulated)", T, float, __nv_bfloat16) {
    check_gemma4_pair<T>(16, 8, 2);  // 31B: 32 q heads over 16 and 4 kv heads, here halved (group 2 and 8)
    check_gemma4_pair<T>(8, 1, 1);   // E2B: 8 q heads over 1 kv head in both kinds
    if constexpr (!std::is_same_v<T, float>) check_gemma4_pair<T, Fp8E4M3>(8, 2, 1);
  }

  TEST_CASE("a layer's shape: its tile list's rows, the slices of its items, its cache's block stride") {
    const AttentionShape global{16, 2, 512, 16, 100, 4, 32};
    CHECK(paged_attention_rows_per_tile(global) == 32);
    CHECK(attention_tile_slices(global, paged_attention_detail::items_per_cta<512>()) == 8);  // 32 rows * 8 heads / 32
    CHECK(attention_tile_slices(AttentionShape{16, 8, 256, 16, 100}, paged_attention_detail::items_per_cta<256>()) == 1);
    CHECK(global.block_heads() == 4);
    CHECK(AttentionShape{16, 2, 512, 16, 100}.block_heads() == 2);
  }

  TEST_CASE("the reference with sinks differs from the one without (the sink cases test something)") {
    const AttentionCase plain = make_attention_case<float>(64, 8, 1, 16);
    const AttentionCase sunk = make_attention_case<float>(64, 8, 1, 16, mixed_batch(), {}, std::nullopt, true);
    REQUIRE(plain.qkv == sunk.qkv);
    std::vector<float> got(plain.ref.begin(), plain.ref.end());
    CHECK(rel_error(got, sunk.ref) > 0.1);
  }

  TEST_CASE_TEMPLATE("the CUDA-core attention kernels read an FP8 cache: the reference on its dequantized values "
                     "(emulated)", T, __nv_bfloat16, __half) {
    check_cuda_core_kernels<T, false, Fp8E4M3>({{64, 6, 2}, {128, 8, 2}, {16, 4, 4}, {48, 8, 1}, {256, 8, 4}});
    check_cuda_core_kernels<T, true, Fp8E4M3>({{64, 6, 2}, {128, 4, 1}}, kFamilyScorings[3]);
  }
}

}  // namespace cbatch::test
