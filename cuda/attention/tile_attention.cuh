// What the two kernels over attention tiles share (paged_attention.cu on CUDA cores, prefill_attention.cu
// on tensor cores): their argument block, built once from the launcher's arguments, the dispatch of a
// runtime head_dim to the compile-time HD the kernels are instantiated for, and the launch over the
// (tile, kv head) grid. Each kernel has two builds: Llama's (FAMILY = false: causal, q.k * scale) and the
// family build for layers with a softcap, a sliding window or attention sinks (AttentionScoring): it starts
// its key loop at the tile's first visible key, masks keys before each row's window, guards its online
// softmax against a key tile in which a row sees no key, and joins each head's sink at the output.
// Included only from .cu files.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/attention_tiles.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/kernel_smem.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/attention/tile_attention_args.cuh"

namespace cbatch {

// The arguments; an FP8 cache (KV = Fp8E4M3) must come with its scales (op names the launcher).
template <typename T, typename KV>
TileAttentionArgs<T, KV> make_tile_attention_args(const char* op, T* d_out, const T* d_qkv, const KV* d_k_cache,
                                                  const KV* d_v_cache, const int32_t* d_positions,
                                                  const int32_t* d_query_start, const int32_t* d_block_tables,
                                                  int max_blocks_per_seq, const int32_t* d_tile_seq,
                                                  const int32_t* d_tile_row, const AttentionShape& shape,
                                                  const AttentionScoring& scoring, const KvScales& scales) {
  if (kFp8Kv<KV> && (scales.k == nullptr || scales.v == nullptr)) {
    throw Error(std::string(op) + ": an FP8 cache needs the layer's k and v scales");
  }
  return {d_out, d_qkv, d_k_cache, d_v_cache, d_positions, d_query_start, d_block_tables, d_tile_seq, d_tile_row,
          max_blocks_per_seq, shape.num_heads, shape.num_kv_heads, shape.block_size,
          paged_attention_rows_per_tile(shape), scoring.scale_for(shape.head_dim), scoring.softcap, scoring.window,
          scales.k, scales.v, scoring.sinks, shape.block_heads()};
}

// Calls launch(std::bool_constant<FAMILY>) with the build the layer needs: Llama's where it has no softcap,
// no window and no sinks.
template <typename F>
void dispatch_scoring(const AttentionScoring& scoring, F&& launch) {
  if (scoring.is_plain()) return launch(std::false_type{});
  return launch(std::true_type{});
}

// Calls launch(std::integral_constant<int, HD>) for head_dim HD in {16, 32, ..., 128}, and 256 and 512 where
// WIDE (paged_attention's builds); the launchers check head_dim first (check_paged_attention_sizes), so no
// other value reaches here.
template <bool WIDE = false, typename F>
void dispatch_head_dim(int head_dim, F&& launch) {
  if constexpr (WIDE) {
    if (head_dim == kWideHeadDim) return launch(std::integral_constant<int, kWideHeadDim>{});
    if (head_dim == kWidestHeadDim) return launch(std::integral_constant<int, kWidestHeadDim>{});
  }
  switch (head_dim) {
    case 16: return launch(std::integral_constant<int, 16>{});
    case 32: return launch(std::integral_constant<int, 32>{});
    case 48: return launch(std::integral_constant<int, 48>{});
    case 64: return launch(std::integral_constant<int, 64>{});
    case 80: return launch(std::integral_constant<int, 80>{});
    case 96: return launch(std::integral_constant<int, 96>{});
    case 112: return launch(std::integral_constant<int, 112>{});
    case 128: return launch(std::integral_constant<int, 128>{});
    default: break;
  }
}

// Runs kernel on the grid (num_tiles, num_kv_heads, slices) with `threads` threads and smem_bytes of dynamic
// shared memory (opting in past the default 48 KB), and checks the launch; slices: attention_tile_slices.
template <typename T, typename KV>
void launch_over_tiles(void (*kernel)(TileAttentionArgs<T, KV>), const TileAttentionArgs<T, KV>& args, int num_tiles,
                       int slices, int threads, size_t smem_bytes, cudaStream_t stream) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem_bytes);
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(args.num_kv_heads),
                  static_cast<unsigned>(slices));
  kernel<<<grid, threads, smem_bytes, stream>>>(args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cbatch
