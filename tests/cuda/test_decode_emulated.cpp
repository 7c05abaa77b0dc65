// The tensor-core decode kernels' block code (decode_mma_block.cuh, decode_stream_block.cuh) run on the CPU
// by the block emulator, with the PTX instructions emulated (warp_mma_emulator.hpp), against the CPU
// reference on the decode rows of the attention tests' batch (attention_case.hpp): the 16-key split kernel
// and the stream kernel over warp cuts and pipeline depths (both also passed their GPU tests on an H200,
// 2026-11-26, which checks the emulation itself). The emulated cp.async lands only when its
// group is waited for, so a read of a stage before its copies complete gives wrong values, and the
// emulator also reports reads of a stage a copy still writes, misaligned or out-of-range addresses, and
// copies left in flight when a block ends. Also the kernels' family builds on windowed, softcapped and
// rescaled cases (the keys before a window NaN in the cache, so a kernel that so much as loads them fails)
// and with attention sinks (joined at a kernel's output or in the merge of its pieces), and the two
// kernels' FP8 builds over an FP8 cache against the reference on its dequantized values.
// Part of the host suite: runs without a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/decode_stream.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "tests/cuda/attention_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulators define the CUDA keywords as macros, for the block code after them.
#include "tests/cuda/block_emulator.hpp"
#include "tests/cuda/warp_mma_emulator.hpp"
#include "cuda/attention/decode_mma_block.cuh"
#include "cuda/attention/decode_stream_block.cuh"

namespace cbatch::test {
namespace {

using decode_detail::DecodeArgs;
using decode_detail::kMmaWarps;
using decode_detail::StreamArgs;

template <typename F>
void with_head_dim(int hd, F&& f) {
  switch (hd) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: FAIL("no tensor-core decode kernel for head_dim " << hd);
  }
}

struct AlignedBytes {
  struct Free {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(128)); }
  };
  std::unique_ptr<unsigned char[], Free> bytes;
  explicit AlignedBytes(size_t n) : bytes(static_cast<unsigned char*>(::operator new[](n, std::align_val_t(128)))) {}
};

// The case's inputs in T on the host (its cache in KV, of cache_heads heads' room a block where set: a layer
// narrower than its cache slot), the outputs poisoned, and the decode kernels' arguments over them.
template <typename T, typename KV = T>
struct HostDecode {
  const AttentionCase& c;
  std::vector<T> qkv;
  std::vector<KV> k, v;
  std::vector<T> out;
  std::vector<float> partial_o, partial_ml;
  int group;
  int cache_heads;

  explicit HostDecode(const AttentionCase& ca, int heads_room = 0)
      : c(ca),
        qkv(to_t<T>(ca.qkv)),
        k(widen_cache(cache_elements<T, KV>(ca, true), ca, heads_room)),
        v(widen_cache(cache_elements<T, KV>(ca, false), ca, heads_room)),
        out(static_cast<size_t>(ca.num_rows()) * ca.q_dim(), from_f32<T>(NAN)),
        group(ca.num_heads / ca.num_kv_heads),
        cache_heads(heads_room) {}

  DecodeArgs<T, KV> args(size_t partials, int keys_per_split) {
    partial_o.assign(partials * group * c.head_dim, NAN);
    partial_ml.assign(partials * group * 2, NAN);
    std::fill(out.begin(), out.end(), from_f32<T>(NAN));
    return DecodeArgs<T, KV>{out.data(), qkv.data(), k.data(), v.data(), c.positions.data(), c.query_start.data(),
                             c.tables.data(), c.decode_seqs.data(), partial_o.data(), partial_ml.data(), c.max_blocks,
                             c.num_heads, c.num_kv_heads, c.block_size, keys_per_split,
                             c.scoring.scale_for(c.head_dim), c.scoring.softcap, c.scoring.window,
                             case_kv_scale<KV>(c, true), case_kv_scale<KV>(c, false), c.host_sinks(),
                             cache_heads};
  }

  // The global arrays the kernels may copy from with cp.async.
  std::vector<std::pair<const void*, size_t>> cache_ranges() const {
    return {{k.data(), k.size() * sizeof(KV)}, {v.data(), v.size() * sizeof(KV)}};
  }

  int num_decode() const { return static_cast<int>(c.decode_seqs.size()); }

  // The decode rows' outputs and their reference values.
  void check_outputs() const {
    std::vector<float> got;
    std::vector<double> want;
    for (int s : c.decode_seqs) {
      const size_t row = static_cast<size_t>(c.query_start[s]) * c.q_dim();
      for (int i = 0; i < c.q_dim(); ++i) {
        got.push_back(to_f32(out[row + i]));
        want.push_back(c.ref[row + i]);
      }
    }
    CHECK(rel_error(got, want) < tolerance<T>());
  }
};

// Runs `block` over the grid with smem_bytes of shared memory, checking the emulated memory's rules.
void emulate(block_emulator::Index grid, int threads, size_t smem_bytes,
             std::vector<std::pair<const void*, size_t>> global, const std::function<void(unsigned char*)>& block) {
  AlignedBytes smem(smem_bytes);
  warp_mma::begin_launch(smem.bytes.get(), smem_bytes, std::move(global));
  block_emulator::launch(grid, threads, [&] { block(smem.bytes.get()); }, [](block_emulator::Index) {
    warp_mma::begin_block();
  });
  warp_mma::end_launch();
  CHECK(warp_mma::memory().error == "");
}

// The outputs from split-KV partials (o, and m in natural-log units, l per q head), merged as
// decode_combine_kernel merges them (the head's sink, where the case has sinks, joining the max and the
// denominator once, here).
template <typename T, typename KV>
void merge_splits(HostDecode<T, KV>& h, int splits) {
  const AttentionCase& c = h.c;
  for (int i = 0; i < h.num_decode(); ++i) {
    const size_t row = static_cast<size_t>(c.query_start[c.decode_seqs[i]]);
    for (int kv = 0; kv < c.num_kv_heads; ++kv) {
      for (int g = 0; g < h.group; ++g) {
        auto partial = [&](int z) {
          return ((static_cast<size_t>(i) * c.num_kv_heads + kv) * splits + z) * h.group + g;
        };
        double m = -INFINITY;
        for (int z = 0; z < splits; ++z) m = std::max(m, static_cast<double>(h.partial_ml[partial(z) * 2]));
        const double sink = c.sinks.empty() ? -INFINITY : c.sinks[static_cast<size_t>(kv * h.group + g)];
        const double top = std::max(m, sink);
        for (int d = 0; d < c.head_dim; ++d) {
          double o = 0.0, l = 0.0;
          for (int z = 0; z < splits; ++z) {
            const double w = std::exp(h.partial_ml[partial(z) * 2] - top);  // 0 for a split without keys
            o += w * h.partial_o[partial(z) * c.head_dim + d];
            l += w * h.partial_ml[partial(z) * 2 + 1];
          }
          h.out[row * c.q_dim() + static_cast<size_t>(kv * h.group + g) * c.head_dim + d] =
              from_f32<T>(static_cast<float>(o / (l + std::exp(sink - top))));
        }
      }
    }
  }
}

// The keys decode row s sees: its window's, or all of them.
int keys_seen(const AttentionCase& c, int s) {
  const int pos = c.positions[c.query_start[s]];
  return pos + 1 - window_first_key(pos, c.scoring.window);
}

// The split tensor-core kernel (its FAMILY build: windows, softcaps): one split, then splits of 128 keys
// (the long decode cut in six, the others leaving empty splits) merged on the host as decode_combine_kernel
// merges them.
template <typename T, bool FAMILY = false, typename KV = T>
void check_mma(const AttentionCase& c, int cache_heads = 0) {
  HostDecode<T, KV> h(c, cache_heads);
  const int num_decode = h.num_decode();
  with_head_dim(c.head_dim, [&](auto head_dim) {
    constexpr int HD = decltype(head_dim)::value;
    using L = decode_detail::MmaLayout<T, HD, KV>;
    for (const int keys_per_split : {1 << 20, 128}) {
      int max_keys = 0;
      for (int s : c.decode_seqs) max_keys = std::max(max_keys, keys_seen(c, s));
      const int splits = (max_keys + keys_per_split - 1) / keys_per_split;
      CAPTURE(splits);
      const DecodeArgs<T, KV> a = h.args(static_cast<size_t>(num_decode) * c.num_kv_heads * splits, keys_per_split);
      emulate({static_cast<unsigned>(num_decode), static_cast<unsigned>(c.num_kv_heads), static_cast<unsigned>(splits)},
              kMmaWarps * 32, L::kBytes, h.cache_ranges(),
              [&](unsigned char* smem) { decode_detail::mma_block<T, HD, FAMILY, KV>(a, smem); });
      if (splits > 1) merge_splits(h, splits);
      h.check_outputs();
    }
  });
}

// The stream kernel (its FAMILY build: windows, softcaps) with STAGES pipeline stages over the given warp
// counts, and its merge launch, over a cache of KV elements.
template <typename T, int STAGES, bool FAMILY = false, typename KV = T>
void check_stream(const AttentionCase& c, std::initializer_list<int> warp_counts, int cache_heads = 0) {
  HostDecode<T, KV> h(c, cache_heads);
  std::vector<int32_t> tile_start(c.decode_seqs.size() + 1);
  decode_stream::build_tile_start(c.positions.data(), c.query_start.data(), c.decode_seqs.data(), h.num_decode(),
                                  tile_start.data(), c.scoring.window);
  const int64_t num_tiles = static_cast<int64_t>(tile_start.back()) * c.num_kv_heads;
  with_head_dim(c.head_dim, [&](auto head_dim) {
    constexpr int HD = decltype(head_dim)::value;
    using L = decode_detail::StreamLayout<T, HD, STAGES, KV>;
    for (int count : warp_counts) {
      const int warps = static_cast<int>(std::min<int64_t>(count, num_tiles));  // past the tiles: one tile a warp
      CAPTURE(warps);
      const DecodeArgs<T, KV> a = h.args(2 * static_cast<size_t>(warps), 0);
      const StreamArgs st{tile_start.data(), num_tiles, warps, h.num_decode()};
      emulate({static_cast<unsigned>((warps + kMmaWarps - 1) / kMmaWarps), 1, 1}, kMmaWarps * 32, L::kBytes,
              h.cache_ranges(),
              [&](unsigned char* smem) { decode_detail::stream_block<T, HD, STAGES, FAMILY, KV>(a, st, smem); });
      if (warps > 1) {
        block_emulator::launch(static_cast<unsigned>(warps), HD, [&] { decode_detail::stream_combine_block(a, st); });
      }
      h.check_outputs();
    }
  });
}

template <typename T>
void check_decode_kernels(std::initializer_list<CaseShape> shapes) {
  for_each_case_shape(shapes, [](int head_dim, int num_heads, int num_kv_heads, int block_size) {
    const AttentionCase c = make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size);
    REQUIRE(c.decode_seqs.size() == 4);
    check_mma<T>(c);
    // Warp counts: one warp for everything, item boundaries inside and across ranges, a range of one
    // tile (each cut item in many pieces), and counts that leave a CTA's last warps idle.
    check_stream<T, 3>(c, {1, 2, 3, 5, 7, 13, 1 << 20});
    check_stream<T, 2>(c, {1, 6, 1 << 20});
  });
}

// The family builds of the two kernels on one scoring: windows that cut tiles and splits (37: a row at
// 700 starts at key 664; 300: its window is three 128-key splits), a softcap that bends the scores, and a
// query scale other than 1 / sqrt(head_dim).
// With sinks: attention sinks too.
template <typename T>
void check_family_decode_kernels(std::initializer_list<CaseShape> shapes, const AttentionScoring& scoring,
                                 bool sinks = false) {
  CAPTURE(scoring.window);
  CAPTURE(scoring.softcap);
  CAPTURE(scoring.scale);
  CAPTURE(sinks);
  for_each_case_shape(shapes, [&](int head_dim, int num_heads, int num_kv_heads, int block_size) {
    const AttentionCase c = make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size, mixed_batch(),
                                                   scoring, std::nullopt, sinks);
    REQUIRE(c.decode_seqs.size() == 4);
    check_mma<T, true>(c);
    check_stream<T, 3, true>(c, {1, 3, 7, 1 << 20});
    check_stream<T, 2, true>(c, {5});
  });
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE_TEMPLATE("the decode kernels' family builds: sliding windows, softcaps, query scales (emulated)", T,
                     __nv_bfloat16, __half) {
    const std::initializer_list<CaseShape> shapes = {{64, 6, 2}, {128, 8, 2}, {32, 8, 8}};
    check_family_decode_kernels<T>(shapes, AttentionScoring{0.0f, 0.0f, 37});   // window only
    check_family_decode_kernels<T>(shapes, AttentionScoring{0.0f, 0.0f, 300});  // window over three splits
    check_family_decode_kernels<T>(shapes, AttentionScoring{0.3f, 2.0f, 0});    // softcap and scale only
    check_family_decode_kernels<T>(shapes, AttentionScoring{0.0f, 2.0f, 64});   // both, window of whole tiles
  }

  TEST_CASE_TEMPLATE("the decode kernels' family builds with attention sinks (emulated)", T, __nv_bfloat16, __half) {
    const std::initializer_list<CaseShape> shapes = {{64, 8, 1}, {64, 6, 2}, {32, 8, 8}};
    check_family_decode_kernels<T>(shapes, AttentionScoring{}, true);                 // sinks only (full layers)
    check_family_decode_kernels<T>(shapes, AttentionScoring{0.0f, 0.0f, 128}, true);  // and gpt-oss.s window
    check_family_decode_kernels<T>(shapes, AttentionScoring{0.0f, 0.0f, 300}, true);  // over three splits
    check_family_decode_kernels<T>({{64, 6, 2}}, AttentionScoring{0.3f, 2.0f, 37}, true);
    for_each_case_shape({{64, 8, 2}}, [&](int head_dim, int num_heads, int num_kv_heads, int block_size) {
      const AttentionCase c = make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size, mixed_batch(),
                                                     AttentionScoring{0.0f, 0.0f, 128}, Fp8KvScales{}, true);
      check_mma<T, true, Fp8E4M3>(c);
      check_stream<T, 3, true, Fp8E4M3>(c, {1, 7});
    });
  }

  TEST_CASE("the window-scored reference differs from the causal one (the family cases test something)") {
    const AttentionCase plain = make_attention_case<__nv_bfloat16>(64, 6, 2, 16);
    for (const AttentionScoring& scoring : {AttentionScoring{0.0f, 0.0f, 37}, AttentionScoring{0.3f, 2.0f, 0}}) {
      const AttentionCase family = make_attention_case<__nv_bfloat16>(64, 6, 2, 16, mixed_batch(), scoring);
      const std::vector<float> family_ref(family.ref.begin(), family.ref.end());
      CHECK(rel_error(family_ref, plain.ref) > 0.05);
    }
  }

  TEST_CASE_TEMPLATE("the tensor-core decode kernels' block code matches the reference (emulated)", T, __nv_bfloat16,
                     __half) {
    check_decode_kernels<T>({{64, 6, 2}, {128, 8, 2}, {32, 8, 8}, {64, 16, 2}, {128, 32, 8}});
  }

  TEST_CASE_TEMPLATE("the tensor-core decode kernels' block code over a cache slot wider than the layer (Gemma 4's "
                     "cache_heads; emulated)", T, __nv_bfloat16, __half) {
    for_each_case_shape({{64, 8, 1}, {32, 8, 2}}, [](int head_dim, int num_heads, int num_kv_heads, int block_size) {
      const AttentionCase c = make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size);
      check_mma<T>(c, 3 * num_kv_heads);  // a room of 3 layers' heads: a stride of the layer's own fails
      check_stream<T, 3>(c, {1, 7}, 3 * num_kv_heads);
      const AttentionCase fp8 = make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size, mixed_batch(),
                                                       AttentionScoring{0.0f, 0.0f, 37}, Fp8KvScales{});
      check_stream<T, 3, true, Fp8E4M3>(fp8, {5}, 2 * num_kv_heads);
    });
  }

  TEST_CASE_TEMPLATE("the tensor-core decode kernels read an FP8 cache: the reference on its dequantized values "
                     "(emulated)", T, __nv_bfloat16, __half) {
    for_each_case_shape({{64, 6, 2}, {128, 8, 2}, {32, 8, 8}}, [](int head_dim, int num_heads, int num_kv_heads,
                                                                  int block_size) {
      const AttentionCase c = make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size, mixed_batch(), {},
                                                     Fp8KvScales{});
      check_mma<T, false, Fp8E4M3>(c);
      check_stream<T, 3, false, Fp8E4M3>(c, {1, 3, 7, 1 << 20});
      check_stream<T, 2, false, Fp8E4M3>(c, {5});
    });
    const AttentionScoring both{0.0f, 2.0f, 64};  // a softcap and a window of whole tiles
    for_each_case_shape({{64, 6, 2}}, [&](int head_dim, int num_heads, int num_kv_heads, int block_size) {
      const AttentionCase c = make_attention_case<T>(head_dim, num_heads, num_kv_heads, block_size, mixed_batch(),
                                                     both, Fp8KvScales{});
      check_mma<T, true, Fp8E4M3>(c);
      check_stream<T, 3, true, Fp8E4M3>(c, {1, 7});
    });
  }

  TEST_CASE("the stream kernel's block code matches the reference on random decode batches (emulated)") {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<AttnSeq> seqs(std::uniform_int_distribution<size_t>(1, 9)(rng));
      for (AttnSeq& s : seqs) {
        s.context = std::uniform_int_distribution<int>(1, 260)(rng);
        s.row_positions = {s.context - 1};
      }
      const int block_size = trial % 2 == 0 ? 16 : std::uniform_int_distribution<int>(1, 40)(rng);
      const int head_dim = trial % 3 == 0 ? 128 : 64;
      CAPTURE(trial);
      CAPTURE(block_size);
      const AttentionCase c = make_attention_case<__nv_bfloat16>(head_dim, 8, 2, block_size, seqs);
      REQUIRE(c.decode_seqs.size() == seqs.size());
      const int warps = std::uniform_int_distribution<int>(1, 12)(rng);
      check_stream<__nv_bfloat16, 3>(c, {warps, 1 << 20});
      check_stream<__nv_bfloat16, 2>(c, {warps});
    }
  }
}

}  // namespace cbatch::test
