// paged_attention against the CPU reference on the mixed ragged batch of attention_case.hpp (and the
// tensor-core prefill_attention on the same tiles for 16-bit types; the decode rows also through every
// decode kernel, CUDA cores and tensor cores, and in a test case of its own the stream kernel over every
// cut into warp ranges, at each pipeline depth the GPU can run), head_dim 16..128 and 256 (Gemma's, on the
// CUDA-core kernels only), GQA groups 1..8, block sizes 16 and 5; and every kernel's family build (sliding
// windows, softcaps, query scales, attention sinks) on the same batch with the cache before every row's
// window NaN; and every kernel over an FP8 cache (--kv-cache-dtype fp8) against the reference on its
// dequantized values.
// test_decode_emulated.cpp and test_cuda_cores_emulated.cpp run the decode kernels' and paged_attention's
// block code on the same batches without a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <random>
#include <type_traits>
#include <vector>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/decode_stream.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/attention/paged_attention.hpp"
#include "cuda/attention/prefill_attention.hpp"
#include "cuda/common/cuda_check.hpp"
#include "tests/cuda/attention_case.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

namespace {

// The kernels a run of check_attention checks: the proven ones, or the stream decode kernel alone (its
// own test case, so that a fault in it, not yet run on a GPU, can be told apart from the others).
enum class Kernels { kProven, kStream };

// A case's K (of_k) or V cache on the device as elements of KV (T, or an FP8 case's codes).
template <typename T, typename KV>
DeviceBuffer<KV> cache_on_device(const AttentionCase& c, bool of_k, int cache_heads = 0) {
  const std::vector<KV> host = widen_cache(cache_elements<T, KV>(c, of_k), c, cache_heads);
  DeviceBuffer<KV> d(host.size());
  CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

// Every kernel on the case of the shape, over a cache of KV elements (T or FP8 codes), against the reference
// (on an FP8 cache's dequantized values); sinks: with attention sinks (uploaded into the kernels' scoring).
// cache_heads, tile_rows (where set): a layer in a wider cache slot, with a tile list cut for another shape
// (AttentionShape; Gemma 4's layers as the backend runs them).
template <typename T, typename KV = T>
void check_attention(int head_dim, int num_heads, int num_kv_heads, int block_size, Kernels which,
                     const AttentionScoring& case_scoring = {}, bool sinks = false, int cache_heads = 0,
                     int tile_rows = 0) {
  const std::optional<Fp8KvScales> fp8 = kFp8Kv<KV> ? std::optional<Fp8KvScales>(Fp8KvScales{}) : std::nullopt;
  const AttentionCase c =
      make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size, mixed_batch(), case_scoring, fp8, sinks);
  const DeviceBuffer<float> d_sinks = to_device<float>(sinks ? c.sinks : std::vector<float>{0.0f});
  AttentionScoring scoring = case_scoring;
  scoring.sinks = sinks ? d_sinks.get() : nullptr;
  const int num_seqs = static_cast<int>(c.seqs.size());
  const int num_blocks = c.num_blocks, max_blocks = c.max_blocks, n = c.num_rows(), q_dim = c.q_dim();
  const int group = num_heads / num_kv_heads;
  const std::vector<int32_t>& positions = c.positions;
  const std::vector<int32_t>& query_start = c.query_start;
  const std::vector<int32_t>& tables = c.tables;
  const std::vector<double>& ref = c.ref;

  const AttentionShape shape{num_heads, num_kv_heads, head_dim, block_size, num_blocks, cache_heads, tile_rows};
  std::vector<int32_t> tile_seq(static_cast<size_t>(n)), tile_row(static_cast<size_t>(n));
  const int num_tiles = build_attention_tiles(query_start.data(), num_seqs, paged_attention_rows_per_tile(shape),
                                              tile_seq.data(), tile_row.data());
  tile_seq.resize(static_cast<size_t>(num_tiles));
  tile_row.resize(static_cast<size_t>(num_tiles));

  auto d_qkv = to_device<T>(c.qkv);
  const DeviceBuffer<KV> d_k = cache_on_device<T, KV>(c, true, cache_heads);
  const DeviceBuffer<KV> d_v = cache_on_device<T, KV>(c, false, cache_heads);
  const DeviceBuffer<float> d_scales = to_device<float>({Fp8KvScales{}.k, Fp8KvScales{}.v});
  const KvScales scales = kFp8Kv<KV> ? KvScales{d_scales.get(), d_scales.get() + 1} : KvScales{};
  auto d_positions = to_device_i32(positions);
  auto d_query_start = to_device_i32(query_start);
  auto d_tables = to_device_i32(tables);
  auto d_tile_seq = to_device_i32(tile_seq);
  auto d_tile_row = to_device_i32(tile_row);
  DeviceBuffer<T> d_out(static_cast<size_t>(n) * q_dim);
  poison(d_out);
  paged_attention<T, KV>(d_out.get(), d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(), d_query_start.get(),
                         d_tables.get(), max_blocks, d_tile_seq.get(), d_tile_row.get(), num_tiles, shape, nullptr,
                         scoring, scales);
  CHECK(rel_error(to_host(d_out), ref) < tolerance<T>());

  // The tensor-core kernel for 16-bit types, on the same tiles (decode and padding rows included), up to
  // head_dim 128.
  if constexpr (!std::is_same_v<T, float>) {
    if (which == Kernels::kProven && head_dim <= 128) {
      poison(d_out);
      prefill_attention<T, KV>(d_out.get(), d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(),
                               d_query_start.get(), d_tables.get(), max_blocks, d_tile_seq.get(), d_tile_row.get(),
                               num_tiles, shape, nullptr, scoring, scales);
      CHECK(rel_error(to_host(d_out), ref) < tolerance<T>());
    }
  }

  // The production split: multi-row sequences through paged_attention, single-row ones through
  // decode_attention, without and with split-KV (many CTAs per long sequence, combined after).
  const bool decode_shape = group <= kDecodeMaxGroup && (head_dim == 16 || head_dim == 32 || head_dim == 64 ||
                                                         head_dim == 128 || head_dim == kWideHeadDim);
  if (!decode_shape) return;
  std::vector<int32_t> multi_seq, multi_row, decode_seqs;
  for (int t = 0; t < num_tiles; ++t) {
    const bool single = query_start[tile_seq[t] + 1] - query_start[tile_seq[t]] == 1;
    if (single) {
      decode_seqs.push_back(tile_seq[t]);
    } else {
      multi_seq.push_back(tile_seq[t]);
      multi_row.push_back(tile_row[t]);
    }
  }
  REQUIRE(decode_seqs.size() == 4);
  auto d_multi_seq = to_device_i32(multi_seq);
  auto d_multi_row = to_device_i32(multi_row);
  auto d_decode = to_device_i32(decode_seqs);
  const int max_partials = 1024;
  DeviceBuffer<float> partial_o(static_cast<size_t>(max_partials) * group * head_dim);
  DeviceBuffer<float> partial_ml(static_cast<size_t>(max_partials) * group * 2);
  std::vector<DecodeKernel> kernels;  // the split-KV kernels (none in the stream kernel's run)
  if (which == Kernels::kProven) kernels.push_back(DecodeKernel::kCudaCores);
  if (which == Kernels::kProven && !std::is_same_v<T, float> && decode_tensor_cores_support(head_dim)) {
    kernels.push_back(DecodeKernel::kTensorCores16);
  }
  // The most keys a decode row sees: 701, or its window's (the splits cut those).
  const int decode_keys = std::min(701, scoring.window > 0 ? scoring.window : 701);
  for (const DecodeKernel kernel : kernels) {
    for (int target_ctas : {1, 512}) {
      const DecodeSplit split = choose_decode_split(4, num_kv_heads, decode_keys, target_ctas, max_partials);
      CAPTURE(split.num_splits);
      CAPTURE(static_cast<int>(kernel));
      CHECK((split.num_splits > 1) == (target_ctas > 1 && decode_keys > kDecodeKeysPerChunk));
      poison(d_out);
      paged_attention<T, KV>(d_out.get(), d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(),
                             d_query_start.get(), d_tables.get(), max_blocks, d_multi_seq.get(), d_multi_row.get(),
                             static_cast<int>(multi_seq.size()), shape, nullptr, scoring, scales);
      decode_attention<T, KV>(d_out.get(), d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(), d_query_start.get(),
                              d_tables.get(), max_blocks, d_decode.get(), 4, split, partial_o.get(), partial_ml.get(),
                              max_partials, shape, nullptr, kernel, nullptr, scoring, scales);
      CHECK(rel_error(to_host(d_out), ref) < tolerance<T>());
    }
  }

  // The stream kernel on the same decode rows, over every way of cutting them into warp ranges up to
  // one tile a warp (items whole, cut in two, cut into many pieces).
  if (which != Kernels::kStream || std::is_same_v<T, float> || !decode_tensor_cores_support(head_dim)) return;
  std::vector<int32_t> tile_start(decode_seqs.size() + 1);
  decode_stream::build_tile_start(positions.data(), query_start.data(), decode_seqs.data(), 4, tile_start.data(),
                                  scoring.window);
  auto d_tile_start = to_device_i32(tile_start);
  DecodeStream plan;
  plan.tile_start = d_tile_start.get();
  plan.num_tiles = static_cast<int64_t>(tile_start.back()) * num_kv_heads;
  // Both pipeline depths (3 stages on Hopper, 2 where the shared memory is smaller), where they fit.
  const DecodeStreamLimits limits = decode_stream_limits<T, KV>(head_dim);
  for (int warps = 1; warps <= plan.num_tiles; warps += warps < 8 ? 1 : 5) {
    for (int stages = limits.stages; stages >= 2; --stages) {
      CAPTURE(warps);
      CAPTURE(stages);
      plan.num_warps = warps;
      plan.stages = stages;
      poison(d_out);
      paged_attention<T, KV>(d_out.get(), d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(),
                             d_query_start.get(), d_tables.get(), max_blocks, d_multi_seq.get(), d_multi_row.get(),
                             static_cast<int>(multi_seq.size()), shape, nullptr, scoring, scales);
      decode_attention<T, KV>(d_out.get(), d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(), d_query_start.get(),
                              d_tables.get(), max_blocks, d_decode.get(), 4, DecodeSplit{1, 1024}, partial_o.get(),
                              partial_ml.get(), max_partials, shape, nullptr, DecodeKernel::kStream, &plan, scoring,
                              scales);
      CHECK(rel_error(to_host(d_out), ref) < tolerance<T>());
    }
  }
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("choose_decode_split fills the GPU only when the sequences do not") {
    const DecodeSplit one = choose_decode_split(256, 8, 2000, 528, 1056);
    CHECK(one.num_splits == 1);
    CHECK(one.keys_per_split >= 2000);
    const DecodeSplit many = choose_decode_split(2, 8, 4000, 528, 1056);
    CHECK(many.num_splits > 1);
    CHECK(many.num_splits * many.keys_per_split >= 4000);
    CHECK((many.num_splits - 1) * many.keys_per_split < 4000);  // no empty trailing split
    CHECK(2 * 8 * many.num_splits <= 1056);
    CHECK(many.keys_per_split % kDecodeKeysPerChunk == 0);
  }
}

TEST_CASE("build_attention_tiles covers every row once, tile by tile") {
  const std::vector<int32_t> query_start = {0, 37, 38, 38, 108};  // an empty sequence in the middle
  std::vector<int32_t> tile_seq(108), tile_row(108);
  const int num_tiles = build_attention_tiles(query_start.data(), 4, 16, tile_seq.data(), tile_row.data());
  CHECK(num_tiles == 3 + 1 + 0 + 5);
  std::vector<int> covered(108, 0);
  for (int t = 0; t < num_tiles; ++t) {
    const int s = tile_seq[t];
    for (int r = tile_row[t]; r < std::min(tile_row[t] + 16, query_start[s + 1]); ++r) ++covered[r];
  }
  CHECK(std::count(covered.begin(), covered.end(), 1) == 108);
  CHECK(paged_attention_rows_per_tile(AttentionShape{32, 8, 128, 16, 1}) == kAttentionItemsPerTile / 4);
  CHECK(paged_attention_rows_per_tile(AttentionShape{6, 2, 64, 16, 1}) == kAttentionItemsPerTile / 3);
}

// check_attention over every shape (for_each_case_shape: blocks of 16 and of 5).
template <typename T, typename KV = T>
void check_attention_shapes(std::initializer_list<CaseShape> shapes, Kernels kernels,
                            const AttentionScoring& scoring = {}, bool sinks = false) {
  CAPTURE(scoring.window);
  CAPTURE(scoring.softcap);
  CAPTURE(scoring.scale);
  CAPTURE(sinks);
  for_each_case_shape(shapes, [&](int head_dim, int num_heads, int num_kv_heads, int block_size) {
    check_attention<T, KV>(head_dim, num_heads, num_kv_heads, block_size, kernels, scoring, sinks);
  });
}

// The family builds: windows that cut key tiles and splits (37; 300, three 128-key splits of the long
// decode), a softcap with a query scale of its own, and both (Gemma 2's), on every kernel.
const AttentionScoring kFamilyScorings[] = {{0.0f, 0.0f, 37}, {0.0f, 0.0f, 300}, {0.3f, 2.0f, 0}, {0.0625f, 2.0f, 64}};

TEST_CASE_TEMPLATE("paged_attention matches the reference on a mixed prefill/decode batch", T, float, __nv_bfloat16,
                   __half) {
  check_attention_shapes<T>({{16, 4, 4}, {64, 6, 2}, {128, 8, 2}, {64, 16, 2}, {48, 8, 1}, {128, 4, 4}, {32, 8, 8},
                             {64, 32, 8}, {128, 32, 8}, {256, 8, 4}, {256, 2, 1}},
                            Kernels::kProven);
}

TEST_CASE_TEMPLATE("paged_attention at head_dim 512 (Gemma 4's global layers) matches the reference: Llama's and "
                   "the family builds, sinks, an FP8 cache", T, float, __nv_bfloat16, __half) {
  check_attention_shapes<T>({{512, 8, 2}, {512, 16, 2}, {512, 4, 1}}, Kernels::kProven);
  check_attention_shapes<T>({{512, 4, 1}}, Kernels::kProven, kFamilyScorings[0]);
  check_attention_shapes<T>({{512, 4, 1}}, Kernels::kProven, kFamilyScorings[3], true);
  if constexpr (!std::is_same_v<T, float>) check_attention_shapes<T, Fp8E4M3>({{512, 8, 2}}, Kernels::kProven);
}

TEST_CASE_TEMPLATE("Gemma 4's layers in their own shapes: a cache slot wider than the layer, the tile list of "
                   "another GQA group (every kernel)", T, float, __nv_bfloat16, __half) {
  for (int block_size : {16, 5}) {
    CAPTURE(block_size);
    // 31B halved: sliding 256 over 8 kv heads of 16 q heads, global 512 over 2, a slot of 8 x 256 values.
    const int tile_rows = paged_attention_rows_per_tile(AttentionShape{16, 8, 256, block_size, 0});
    check_attention<T>(512, 16, 2, block_size, Kernels::kProven, {}, false, 4, tile_rows);
    check_attention<T>(256, 16, 8, block_size, Kernels::kProven, {0.0f, 0.0f, 37}, false, 8, tile_rows);
    // E2B: one kv head of 256 in a slot of 512; and a small pair on the tensor-core kernels (head 64 over 1
    // kv head in a slot of 4 x 32, the tile list of 8 q heads over 4).
    check_attention<T>(256, 8, 1, block_size, Kernels::kProven, {0.0f, 0.0f, 37}, false, 2);
    for (Kernels kernels : {Kernels::kProven, Kernels::kStream}) {
      check_attention<T>(64, 8, 1, block_size, kernels, {}, false, 2,
                         paged_attention_rows_per_tile(AttentionShape{8, 4, 32, block_size, 0}));
    }
  }
}

TEST_CASE_TEMPLATE("the stream decode kernel matches the reference over every cut into warp ranges", T,
                   __nv_bfloat16, __half) {
  check_attention_shapes<T>({{64, 6, 2}, {128, 8, 2}, {64, 16, 2}, {128, 4, 4}, {32, 8, 8}, {64, 32, 8}, {128, 32, 8}},
                            Kernels::kStream);
}

TEST_CASE_TEMPLATE("every attention kernel's family build: sliding windows, softcaps, query scales", T, float,
                   __nv_bfloat16, __half) {
  for (const AttentionScoring& scoring : kFamilyScorings) {
    check_attention_shapes<T>({{64, 6, 2}, {128, 8, 2}, {48, 8, 1}, {32, 8, 8}, {256, 8, 4}}, Kernels::kProven,
                              scoring);
  }
}

TEST_CASE_TEMPLATE("every attention kernel's family build with attention sinks (gpt-oss)", T, float, __nv_bfloat16,
                   __half) {
  const std::initializer_list<CaseShape> shapes = {{64, 8, 1}, {64, 6, 2}, {32, 8, 8}, {256, 2, 1}};
  check_attention_shapes<T>(shapes, Kernels::kProven, AttentionScoring{}, true);
  check_attention_shapes<T>(shapes, Kernels::kProven, AttentionScoring{0.0f, 0.0f, 128}, true);
  check_attention_shapes<T>({{64, 8, 1}, {64, 6, 2}}, Kernels::kProven, kFamilyScorings[3], true);
  if constexpr (!std::is_same_v<T, float>) {
    check_attention_shapes<T>({{64, 8, 1}, {64, 6, 2}}, Kernels::kStream, AttentionScoring{0.0f, 0.0f, 128}, true);
    check_attention_shapes<T, Fp8E4M3>({{64, 8, 2}}, Kernels::kProven, AttentionScoring{0.0f, 0.0f, 128}, true);
  }
}

TEST_CASE_TEMPLATE("the stream decode kernel's family build over cuts into warp ranges", T, __nv_bfloat16, __half) {
  for (const AttentionScoring& scoring : kFamilyScorings) {
    check_attention_shapes<T>({{64, 6, 2}, {128, 8, 2}}, Kernels::kStream, scoring);
  }
}

TEST_CASE_TEMPLATE("every attention kernel reads an FP8 cache (the reference on its dequantized values)", T,
                   __nv_bfloat16, __half) {
  const std::initializer_list<CaseShape> shapes = {{64, 6, 2}, {128, 8, 2}, {16, 4, 4}, {32, 8, 8}, {256, 8, 4}};
  check_attention_shapes<T, Fp8E4M3>(shapes, Kernels::kProven);
  check_attention_shapes<T, Fp8E4M3>({{64, 6, 2}, {128, 8, 2}, {32, 8, 8}}, Kernels::kStream);
  check_attention_shapes<T, Fp8E4M3>({{64, 6, 2}, {128, 8, 2}}, Kernels::kProven, kFamilyScorings[3]);
  check_attention_shapes<T, Fp8E4M3>({{64, 6, 2}}, Kernels::kStream, kFamilyScorings[3]);
}

}  // namespace cbatch::test
