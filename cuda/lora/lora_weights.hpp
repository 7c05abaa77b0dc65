// LoRA adapters on the device (lora_layout.hpp's pack, converted to the compute dtype T once at load) and
// the step's use of them: add() runs the shrink and expand kernels (lora.hpp) on one product of a layer for
// the step's tiles. The shrunk rows live in a (max_rows, max_rank_total) fp32 scratch reused by every call.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/lora/lora_layout.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

// Throws cbatch::Error naming the adapter for what the CUDA backend does not run with adapters: FP8 weights,
// and a gate/up/down pair on a sparse layer (its experts have no dense FFN to add to). Whatever else the
// loader accepts has a product to add to (backend_checks.cpp refuses the models the CUDA forward does not run).
void check_cuda_lora(const std::vector<LoraAdapter>& adapters, const ModelConfig& config, bool fp8_weights);

template <typename T>
class LoraWeights {
 public:
  LoraWeights() = default;
  // Uploads every adapter (num_layers layers) for steps of at most max_rows rows; synchronous.
  LoraWeights(const std::vector<LoraAdapter>& adapters, int num_layers, int max_rows);

  int num_adapters() const { return num_adapters_; }
  size_t bytes() const { return arena_.bytes() + slots_.bytes() + shrunk_.bytes(); }

  // y (rows, y_stride) += each tile row's adapter pairs on `product` of `layer`, scale * B (A x), x (rows,
  // x_stride); width: the product's columns. Nothing runs when no tile or no adapter touches the product.
  void add(LoraProduct product, int layer, const LoraTile* d_tiles, int num_tiles, const T* d_x, int64_t x_stride,
           T* d_y, int64_t y_stride, int width, cudaStream_t stream);

 private:
  int num_adapters_ = 0;
  int max_rank_total_ = 0;
  std::vector<bool> used_;            // (num_layers, kNumLoraProducts): some adapter has a pair there
  DeviceBuffer<T> arena_;             // the pack's values in T
  DeviceBuffer<LoraDeviceSlot<T>> slots_;   // (num_layers, kNumLoraProducts, num_adapters + 1)
  DeviceBuffer<float> shrunk_;        // (max_rows, max_rank_total)
};

}  // namespace cbatch
