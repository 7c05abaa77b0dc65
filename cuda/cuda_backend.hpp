// Host-only entry points of the CUDA backend: device discovery and the backend factory. Includes no
// CUDA header, so cmd/ can call it from plain C++.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/model/lora_adapter.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

enum class ComputeDType { kBF16, kF16, kF32 };

struct CudaBackendOptions {
  ComputeDType dtype = ComputeDType::kBF16;
  int max_batch_tokens = 8192;          // rows of the largest RaggedBatch forward() will see
  int max_num_seqs = 256;               // sequences of the largest batch
  int max_context = 0;                  // longest sequence (prompt + generated) in tokens
  float gpu_memory_utilization = 0.9f;  // fraction of the GPU's memory cbatch may use in total
  int device_index = 0;
  bool fp8_weights = false;             // --quantization fp8: linear layers' weights in FP8 E4M3 (sm_89+)
  bool fp8_kv_cache = false;            // --kv-cache-dtype fp8: the paged KV cache in FP8 E4M3 (sm_89+)
  // LoRA adapters (id i + 1 = loras[i]), uploaded at load; RaggedBatch::lora_ids picks them per sequence.
  std::shared_ptr<const std::vector<LoraAdapter>> loras;
};

// Compute capability as major * 10 + minor (90 for sm_90); throws cbatch::Error when it cannot be queried.
int cuda_compute_capability(int device_index);

// Number of usable CUDA devices (0 when there is no driver or no GPU; never throws).
int cuda_device_count();
// "NVIDIA H100 80GB HBM3 (sm_90)"; throws cbatch::Error when the device cannot be queried.
std::string cuda_device_description(int device_index);

// Uploads the model's weights (converted to the compute dtype) and builds the workspace.
// Throws cbatch::Error with the numbers when the model does not fit.
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const CudaBackendOptions& options);

}  // namespace cbatch
