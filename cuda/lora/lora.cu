// The LoRA kernels, punica's SGMV idea over a step's tiles (runs of <= kLoraTileRows rows of one adapter,
// lora_layout.hpp): lora_shrink, one block a tile, each warp a rank at a time with A's row read once for all
// the tile's rows; lora_expand, one block per (tile, 256 columns), each thread an output column of the
// product with (scale * B)^T read coalesced. fp32 sums; inputs and y in T. Block code in lora_block.cuh.
#include "cuda/lora/lora.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/lora/lora_block.cuh"

namespace cbatch {

using namespace lora_detail;

template <typename T>
__global__ void __launch_bounds__(kShrinkThreads)
    lora_shrink_kernel(float* __restrict__ t, int t_stride, const T* __restrict__ x, int64_t x_stride,
                       const LoraDeviceSlot<T>* __restrict__ slots, const LoraTile* __restrict__ tiles) {
  lora_shrink_block(t, t_stride, x, x_stride, slots, tiles);
}

template <typename T>
__global__ void __launch_bounds__(kExpandThreads)
    lora_expand_kernel(T* __restrict__ y, int64_t y_stride, const float* __restrict__ t, int t_stride,
                       const LoraDeviceSlot<T>* __restrict__ slots, const LoraTile* __restrict__ tiles) {
  lora_expand_block(y, y_stride, t, t_stride, slots, tiles);
}

static void check_tiles(const char* op, int num_tiles, int t_stride) {
  if (num_tiles < 0 || t_stride <= 0) {
    throw Error(std::string(op) + ": bad sizes num_tiles=" + std::to_string(num_tiles) +
                " t_stride=" + std::to_string(t_stride));
  }
}

template <typename T>
void lora_shrink(float* d_t, int t_stride, const T* d_x, int64_t x_stride, const LoraDeviceSlot<T>* d_slots,
                 const LoraTile* d_tiles, int num_tiles, cudaStream_t stream) {
  check_tiles("lora_shrink", num_tiles, t_stride);
  if (x_stride <= 0) throw Error("lora_shrink: bad x_stride " + std::to_string(x_stride));
  if (num_tiles == 0) return;
  lora_shrink_kernel<T><<<num_tiles, kShrinkThreads, 0, stream>>>(d_t, t_stride, d_x, x_stride, d_slots, d_tiles);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void lora_expand(T* d_y, int64_t y_stride, int width, const float* d_t, int t_stride, const LoraDeviceSlot<T>* d_slots,
                 const LoraTile* d_tiles, int num_tiles, cudaStream_t stream) {
  check_tiles("lora_expand", num_tiles, t_stride);
  if (width <= 0 || y_stride < width) {
    throw Error("lora_expand: bad width " + std::to_string(width) + " for y_stride " + std::to_string(y_stride));
  }
  if (num_tiles == 0) return;
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>((width + kExpandThreads - 1) / kExpandThreads));
  lora_expand_kernel<T><<<grid, kExpandThreads, 0, stream>>>(d_y, y_stride, d_t, t_stride, d_slots, d_tiles);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_LORA(T)                                                                                \
  template void lora_shrink<T>(float*, int, const T*, int64_t, const LoraDeviceSlot<T>*, const LoraTile*, int,         \
                               cudaStream_t);                                                                     \
  template void lora_expand<T>(T*, int64_t, int, const float*, int, const LoraDeviceSlot<T>*, const LoraTile*, int,    \
                               cudaStream_t);
CBATCH_INSTANTIATE_LORA(float)
CBATCH_INSTANTIATE_LORA(__nv_bfloat16)
CBATCH_INSTANTIATE_LORA(__half)
#undef CBATCH_INSTANTIATE_LORA

}  // namespace cbatch
