// The block code of the LoRA kernels (lora.cu, whose header describes them): shrink t = x A^T and
// expand-and-add y += t (sB)^T over a step's tiles (lora_layout.hpp). It uses no CUDA header of its own:
// include it after cuda_dtype.cuh, or on the host after tests/cuda/block_emulator.hpp and then
// cuda_dtype.cuh (tests/cuda/test_lora_emulated.cpp). Sums run in fp32; y is read and written in T.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/lora/lora_layout.hpp"

namespace cbatch::lora_detail {

constexpr int kShrinkThreads = 256;  // 8 warps, each a rank at a time
constexpr int kExpandThreads = 256;  // one output column a thread

// Block blockIdx.x takes tile blockIdx.x; each warp computes ranks k = warp, warp + 8, ... of the slot for
// the tile's rows at once (A's row read once, lanes striding over in), reduced across the warp.
template <typename T>
__device__ __forceinline__ void lora_shrink_block(float* __restrict__ t, int t_stride,     // (rows, t_stride)
                                                  const T* __restrict__ x, int64_t x_stride,  // (rows, x_stride)
                                                  const LoraDeviceSlot<T>* __restrict__ slots,     // (num_adapters + 1)
                                                  const LoraTile* __restrict__ tiles) {     // (num_tiles)
  const LoraTile tile = tiles[blockIdx.x];
  const LoraDeviceSlot<T>& slot = slots[tile.adapter];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, num_warps = blockDim.x / 32;
  const T* rows = x + static_cast<size_t>(tile.row) * x_stride;
  for (int k = warp; k < slot.rank_total; k += num_warps) {
    const T* a = slot.a + static_cast<size_t>(k) * slot.in;
    float acc[kLoraTileRows] = {};
    for (int i = lane; i < slot.in; i += 32) {
      const float av = to_float(a[i]);
#pragma unroll
      for (int r = 0; r < kLoraTileRows; ++r) {
        if (r < tile.rows) acc[r] += av * to_float(rows[static_cast<size_t>(r) * x_stride + i]);
      }
    }
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r) {
      const float sum = warp_sum(acc[r]);
      if (lane == 0 && r < tile.rows) t[static_cast<size_t>(tile.row + r) * t_stride + k] = sum;
    }
  }
}

// Block (tile blockIdx.x, column chunk blockIdx.y): thread column j of the product, if a part of the slot
// covers it, adds its rank's sum to the tile's rows. Columns no part covers are left as they are.
template <typename T>
__device__ __forceinline__ void lora_expand_block(T* __restrict__ y, int64_t y_stride,            // (rows, y_stride)
                                                  const float* __restrict__ t, int t_stride,     // (rows, t_stride)
                                                  const LoraDeviceSlot<T>* __restrict__ slots,         // (num_adapters + 1)
                                                  const LoraTile* __restrict__ tiles) {          // (num_tiles)
  const LoraTile tile = tiles[blockIdx.x];
  const LoraDeviceSlot<T>& slot = slots[tile.adapter];
  const int j = blockIdx.y * blockDim.x + threadIdx.x;
  int p = 0;
  while (p < slot.num_parts && !(j >= slot.parts[p].row_offset && j < slot.parts[p].row_offset + slot.parts[p].rows)) ++p;
  if (p == slot.num_parts) return;
  const LoraDevicePart<T> part = slot.parts[p];
  const T* bt = part.bt + (j - part.row_offset);  // column j of (rank, rows)
  const float* shrunk = t + static_cast<size_t>(tile.row) * t_stride + part.rank_offset;
  float acc[kLoraTileRows] = {};
  for (int k = 0; k < part.rank; ++k) {
    const float b = to_float(bt[static_cast<size_t>(k) * part.rows]);
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r) {
      if (r < tile.rows) acc[r] += b * shrunk[static_cast<size_t>(r) * t_stride + k];
    }
  }
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r) {
    if (r >= tile.rows) continue;
    T& out = y[static_cast<size_t>(tile.row + r) * y_stride + j];
    out = from_float<T>(to_float(out) + acc[r]);
  }
}

}  // namespace cbatch::lora_detail
