// What the CUDA backend (its class: cuda_forward.hpp) decides once it is built: the kernels it picks where it
// has a choice and what it tells the engine about itself (BackendTraits); and make_cuda_backend.
#include "cuda/backend/cuda_backend.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/paged_attention.hpp"
#include "cuda/backend/backend_checks.hpp"
#include "cuda/backend/cuda_forward.hpp"
#include "cuda/lora/lora_weights.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

template <typename T>
const CudaContext& CudaBackend<T>::context_with_shared_memory() const {
  const int widest = config_.max_head_dim();  // Gemma 4's global layers: 512, on the tile kernel alone
  if (widest <= 128) return context_;  // every kernel fits every supported GPU
  size_t need = paged_attention_smem_bytes(widest) + kAttentionItemsPerTile * sizeof(int);
  if (config_.head_dim > 128 && config_.head_dim <= kWideHeadDim) {  // the decode kernel's layers (256)
    need = std::max({need, paged_attention_smem_bytes(config_.head_dim) + kAttentionItemsPerTile * sizeof(int),
                     decode_cuda_cores_smem_bytes<T>(config_.head_dim)});
  }
  const size_t has = context_.properties().sharedMemPerBlockOptin;
  if (need > has) {
    unsupported("head_dim " + std::to_string(widest) + " on " + context_.properties().name +
                ": its attention kernels need " + std::to_string(need) + " bytes of shared memory per block, the "
                "GPU allows " + std::to_string(has) + " (use --device cpu)");
  }
  return context_;
}

template <typename T>
std::optional<DecodeKernel> CudaBackend<T>::decode_kernel_choice() const {
  const std::optional<DecodeKernel> kernel = decode_kernel_for_dtype(config_, options_.kernels.decode);
  if constexpr (!std::is_same_v<T, float>) {
    if (kernel == DecodeKernel::kStream) {
      const size_t has = context_.properties().sharedMemPerBlockOptin;
      const size_t need = options_.fp8_kv_cache ? decode_stream_smem_bytes<T, Fp8E4M3>(config_.head_dim, 2)
                                                : decode_stream_smem_bytes<T, T>(config_.head_dim, 2);
      if (need > has) return DecodeKernel::kTensorCores16;
    }
  }
  return kernel;
}

template <typename T>
std::optional<DecodeKernel> CudaBackend<T>::decode_kernel_for_dtype(const ModelConfig& c, DecodeAttention asked) {
  const bool shape_ok = c.num_heads / c.num_kv_heads <= kDecodeMaxGroup &&
                        (c.head_dim == 16 || c.head_dim == 32 || c.head_dim == 64 || c.head_dim == 128 ||
                         c.head_dim == kWideHeadDim);
  if (!shape_ok || asked == DecodeAttention::kPaged) return std::nullopt;
  if (std::is_same_v<T, float> || asked == DecodeAttention::kCudaCores || !decode_tensor_cores_support(c.head_dim)) {
    return DecodeKernel::kCudaCores;
  }
  return asked == DecodeAttention::kTensorCores16 ? DecodeKernel::kTensorCores16 : DecodeKernel::kStream;
}

template <typename T>
BackendTraits CudaBackend<T>::make_traits() const {
  BackendTraits t;
  t.device_name = std::string("cuda:") + context_.properties().name + (options_.fp8_weights ? " (fp8 weights)" : "");
  t.samples_on_device = device_sampling_;
  t.answers_logprob_queries = true;
  // The layers' linear weights as kept: T, FP8 (1 byte a parameter; its one scale a tensor not counted) or blocks
  // (Q4_K 0.5625, Q8_0 1.0625, ...); the lm_head, in T, is counted at that rate too.
  double linear_bytes = 0, linear_params = 0;
  for (const LayerWeights<T>& w : weights_.layers) {
    for (const LinearWeight<T>& m : w.linear.items) {
      linear_bytes += static_cast<double>(m.weight.bytes() + m.codes.bytes() + m.blocks.bytes());
      linear_params += static_cast<double>(m.out) * static_cast<double>(m.in);
    }
  }
  t.weight_bytes_per_param =
      linear_params > 0 ? linear_bytes / linear_params : (options_.fp8_weights ? 1.0 : sizeof(T));
  t.weight_bytes = static_cast<int64_t>(weights_.bytes());  // every matrix, table and vector as held on the device
  t.notes = weights_.notes;
  // Routed experts as kept (device_weights.hpp): MXFP4 17/32, Q8_0 34/32, FP8 1 + the row scales' 4 / k, else T.
  double bytes = 0, params = 0;
  for (const LayerWeights<T>& w : weights_.layers) {
    const ExpertMatrix<T>& gate_up = w.experts[ExpertProduct::kGateUp];
    if (gate_up.bytes() == 0) continue;  // a dense layer
    bytes += static_cast<double>(gate_up.bytes() + w.experts[ExpertTensor::kDown].bytes());
    params += 3.0 * config_.num_experts * config_.dim * config_.expert_hidden_dim;
  }
  t.expert_bytes_per_param = params > 0 ? bytes / params : t.weight_bytes_per_param;
  t.kv_bytes_per_elem = static_cast<double>(kv_elem_bytes());
  t.runs_recurrent_layers = true;  // DeltaNet, short-conv and Mamba-2 layers (step_recurrent.cpp, backend_checks.cpp)
  // The snapshots are slots beyond the running ones (CudaBackendOptions::state_snapshots), copied to and from
  // as a fork's state is (step_recurrent.cpp).
  t.keeps_state_snapshots = true;
  return t;
}

#define CBATCH_INSTANTIATE_BACKEND(T)                                                                         \
  template const CudaContext& CudaBackend<T>::context_with_shared_memory() const;                             \
  template std::optional<DecodeKernel> CudaBackend<T>::decode_kernel_choice() const;                          \
  template std::optional<DecodeKernel> CudaBackend<T>::decode_kernel_for_dtype(const ModelConfig&,            \
                                                                               DecodeAttention);              \
  template BackendTraits CudaBackend<T>::make_traits() const;
CBATCH_INSTANTIATE_BACKEND(float)
CBATCH_INSTANTIATE_BACKEND(__nv_bfloat16)
CBATCH_INSTANTIATE_BACKEND(__half)
#undef CBATCH_INSTANTIATE_BACKEND

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const CudaBackendOptions& options) {
  if (options.loras) check_cuda_lora(*options.loras, model.config, options.fp8_weights);  // before the device
  check_options(options);
  switch (options.dtype) {
    case ComputeDType::kBF16: return std::make_unique<CudaBackend<__nv_bfloat16>>(model, options);
    case ComputeDType::kF16: return std::make_unique<CudaBackend<__half>>(model, options);
    case ComputeDType::kF32: return std::make_unique<CudaBackend<float>>(model, options);
  }
  throw Error("unknown compute dtype");
}

}  // namespace cbatch
