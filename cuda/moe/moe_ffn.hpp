// The mixture-of-experts FFN of a sparse layer on the device (moe_ffn.cpp): router GEMM, routing, the
// permutation by expert, gather, grouped gate|up GEMMs, the activation with the experts' biases, grouped
// down GEMMs, and the un-permute + weighted sum (plus Qwen2-MoE's shared expert) into the layer's delta.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/backend/device_weights.hpp"
#include "cuda/backend/step_profiler.hpp"
#include "cuda/common/cuda_context.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/moe/moe_gemm.hpp"
#include "cuda/moe/moe_quant_gemm.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

template <typename T>
class MoeFfn {
 public:
  // Buffers for max_tokens rows of config c's sparse layers (none for a dense model); grouped_gemm: the
  // expert products in T as grouped GEMMs where cuBLAS has them (ExpertGemm).
  MoeFfn(const ModelConfig& c, int max_tokens, bool grouped_gemm);

  // out (n, dim) T = the MoE FFN of h (n, dim) T with layer weights w, on the context's stream; the router
  // reads router_in (n, dim) T where given (Gemma 4's: its own norm of the residual), else h. Returns the
  // distinct experts the rows picked. Waits for the stream once where an expert product is in T: the
  // expert offsets are copied to the host, since cuBLAS takes the GEMMs' row counts there. A layer whose
  // experts are all quantized does not wait and returns 0: its count comes from take_touched.
  int forward(const LayerWeights<T>& w, const T* d_h, int n, T* d_out, const CudaContext& context,
              StepProfiler& profiler, const T* d_router_in = nullptr);

  // The distinct experts picked in the layers that did not wait since the last call; call it after the
  // stream is synced (the step's end).
  int take_touched();

  size_t device_bytes() const;

 private:
  // y (picks, n) = the rows' products with their experts' w (n, k): moe_quant_gemm for quantized experts,
  // else cuBLAS over host_offsets_ (pointer table `table`).
  void expert_product(const ExpertMatrix<T>& w, T* d_y, const T* d_x, int picks, int n, int k, int table,
                      const CudaContext& context);
  int count_touched(const int32_t* offsets) const;

  ModelConfig config_;
  int num_picks_max_ = 0;
  DeviceBuffer<float> logits_;          // (max_tokens, num_experts) router output
  DeviceBuffer<int32_t> experts_;       // (max_tokens, top_k) each row's picks
  DeviceBuffer<float> weights_;         // (max_tokens, top_k) their weights
  DeviceBuffer<int32_t> offsets_;       // (num_experts + 1) each expert's first slot
  PinnedBuffer<int32_t> host_offsets_;  // (num_experts + 1) their host copy
  PinnedBuffer<int32_t> pending_offsets_;  // (num_layers, num_experts + 1) copies of the layers that did not wait
  int pending_layers_ = 0;              // of those, this step's
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
