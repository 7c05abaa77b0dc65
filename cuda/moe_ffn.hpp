// The mixture-of-experts FFN of a sparse layer on the device (moe_ffn.cpp): router GEMM, routing, the
// permutation by expert, gather, grouped gate|up GEMMs, the activation with the experts' biases, grouped
// down GEMMs, and the un-permute + weighted sum (plus Qwen2-MoE's shared expert) into the layer's delta.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_context.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_weights.hpp"
#include "cuda/moe_gemm.hpp"
#include "cuda/step_profiler.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

template <typename T>
class MoeFfn {
 public:
  // Buffers for max_tokens rows of config c's sparse layers (none for a dense model).
  MoeFfn(const ModelConfig& c, int max_tokens);

  // out (n, dim) T = the MoE FFN of h (n, dim) T with layer weights w, on the context's stream. Returns the
  // distinct experts the rows picked. Waits for the stream once: the expert offsets are copied to the host,
  // since cuBLAS takes the GEMMs' row counts there.
  int forward(const MoeLayerWeights<T>& w, const T* d_h, int n, T* d_out, const CudaContext& context,
              StepProfiler& profiler);

  size_t device_bytes() const;

 private:
  ModelConfig config_;
  int num_picks_max_ = 0;
  DeviceBuffer<float> logits_;          // (max_tokens, num_experts) router output
  DeviceBuffer<int32_t> experts_;       // (max_tokens, top_k) each row's picks
  DeviceBuffer<float> weights_;         // (max_tokens, top_k) their weights
  DeviceBuffer<int32_t> offsets_;       // (num_experts + 1) each expert's first slot
  PinnedBuffer<int32_t> host_offsets_;  // (num_experts + 1) their host copy
  DeviceBuffer<int32_t> entries_;       // (max_tokens * top_k) the pick at each slot
  DeviceBuffer<int32_t> pick_slot_;     // (max_tokens * top_k) each pick's slot
  DeviceBuffer<int32_t> slot_expert_;   // (max_tokens * top_k) each slot's expert
  DeviceBuffer<T> rows_;                // (max_tokens * top_k, dim) gathered input, then the experts' output
  DeviceBuffer<T> gate_up_;             // (max_tokens * top_k, 2 * expert_hidden)
  DeviceBuffer<T> hidden_;              // (max_tokens * top_k, expert_hidden) activation output
  DeviceBuffer<T> shared_gate_up_;      // (max_tokens, 2 * shared_hidden); empty without a shared expert
  DeviceBuffer<T> shared_hidden_;       // (max_tokens, shared_hidden)
  DeviceBuffer<T> shared_out_;          // (max_tokens, dim)
  ExpertGemm<T> gemm_;
};

}  // namespace cbatch
