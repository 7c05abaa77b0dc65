// Host launchers of the LoRA kernels (lora.cu): the SGMV-style shrink and expand-and-add over a step's tiles
// of rows grouped by adapter (lora_layout.hpp). Together they add scale * B (A x) of every pair an adapter
// puts on a product to that product's output rows, as engine/cpu/cpu_lora.cpp does on the CPU.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/lora/lora_layout.hpp"

namespace cbatch {

// t (rows, t_stride) fp32: for each row r of the tiles, t[r, k] = A_k . x[r] over the k < rank_total of its
// adapter's slot (slots (num_adapters + 1) on the device). x (rows, x_stride) in T. t_stride >= the slots'
// largest rank_total.
template <typename T>
void lora_shrink(float* d_t, int t_stride, const T* d_x, int64_t x_stride, const LoraDeviceSlot<T>* d_slots,
                 const LoraTile* d_tiles, int num_tiles, cudaStream_t stream);

// y (rows, y_stride) in T: for each row r of the tiles and each part of its adapter's slot,
// y[r, part.row_offset + j] += sum_k bt[k, j] * t[r, part.rank_offset + k], summed in fp32. width: the
// product's columns (every part lies inside it).
template <typename T>
void lora_expand(T* d_y, int64_t y_stride, int width, const float* d_t, int t_stride, const LoraDeviceSlot<T>* d_slots,
                 const LoraTile* d_tiles, int num_tiles, cudaStream_t stream);

}  // namespace cbatch
