// MoeFfn::forward, a sparse layer in eleven launches: the router GEMM (fp32 logits), routing, the
// permutation, gather, grouped gate|up GEMMs over the non-empty experts, the activation, grouped down GEMMs
// back into the gathered rows' buffer, the shared expert's dense FFN, and the combine into out.
// Experts in T go through cuBLAS, whose GEMM shapes are on the host: the expert offsets are copied there
// and the stream synced, one small copy and one pipeline drain per sparse layer (docs/cuda.md). When both
// products of a layer take moe_quant_gemm (quantized experts), which reads the offsets on the device, the
// layer does not wait: its offsets go to a pinned slot of their own, counted as touched experts after the
// step's own sync (take_touched). Otherwise the offsets on the host count them at once.
#include "cuda/moe/moe_ffn.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.hpp"
#include "cuda/elementwise/swiglu.hpp"
#include "cuda/gemm/gemm.hpp"
#include "cuda/moe/moe.hpp"

namespace cbatch {
namespace {

size_t sized(const ModelConfig& c, int64_t n) { return c.is_moe() ? static_cast<size_t>(n) : 0; }

}  // namespace

template <typename T>
MoeFfn<T>::MoeFfn(const ModelConfig& c, int max_tokens, bool grouped_gemm)
    : config_(c),
      num_picks_max_(max_tokens * c.experts_per_token),
      logits_(sized(c, int64_t{max_tokens} * c.num_experts)),
      experts_(sized(c, num_picks_max_)),
      weights_(sized(c, num_picks_max_)),
      offsets_(sized(c, c.num_experts + 1)),
      host_offsets_(sized(c, c.num_experts + 1)),
      pending_offsets_(sized(c, int64_t{c.num_layers} * (c.num_experts + 1))),
      entries_(sized(c, num_picks_max_)),
      pick_slot_(sized(c, num_picks_max_)),
      slot_expert_(sized(c, num_picks_max_)),
      rows_(sized(c, int64_t{num_picks_max_} * c.dim)),
      gate_up_(sized(c, int64_t{num_picks_max_} * 2 * c.expert_hidden_dim)),
      hidden_(sized(c, int64_t{num_picks_max_} * c.expert_hidden_dim)),
      shared_gate_up_(sized(c, int64_t{max_tokens} * 2 * c.shared_expert_hidden_dim)),
      shared_hidden_(sized(c, int64_t{max_tokens} * c.shared_expert_hidden_dim)),
      shared_out_(sized(c, c.shared_expert_hidden_dim > 0 ? int64_t{max_tokens} * c.dim : 0)),
      gemm_(c.is_moe() ? c.num_experts : 0, grouped_gemm) {}

template <typename T>
size_t MoeFfn<T>::device_bytes() const {
  return logits_.bytes() + experts_.bytes() + weights_.bytes() + offsets_.bytes() + entries_.bytes() +
         pick_slot_.bytes() + slot_expert_.bytes() + rows_.bytes() + gate_up_.bytes() + hidden_.bytes() +
         shared_gate_up_.bytes() + shared_hidden_.bytes() + shared_out_.bytes();
}

template <typename T>
int MoeFfn<T>::forward(const LayerWeights<T>& w, const T* d_h, int n, T* d_out, const CudaContext& context,
                       StepProfiler& profiler, const T* d_router_in) {
  const ModelConfig& c = config_;
  const cudaStream_t stream = context.stream();
  const int dim = c.dim, k = c.experts_per_token, num_experts = c.num_experts, width = c.expert_hidden_dim;
  const int picks = n * k;
  if (picks > num_picks_max_) {
    throw Error("moe: " + std::to_string(n) + " rows exceed the workspace's " + std::to_string(num_picks_max_ / k));
  }
  const ExpertMatrix<T>& gate_up = w.experts[ExpertProduct::kGateUp];
  const ExpertMatrix<T>& down = w.experts[ExpertTensor::kDown];
  gemm<T, float>(context.cublas(), stream, logits_.get(), d_router_in != nullptr ? d_router_in : d_h,
                 w.linear[LayerTensor::kRouter].weight.get(), n, num_experts, dim);
  // Gemma 4's router input is rmsnorm(x) * scale * dim^-1/2: the last factor is applied to the logits.
  const float logit_scale = c.experts_beside_dense ? 1.0f / std::sqrt(static_cast<float>(dim)) : 1.0f;
  moe_route(experts_.get(), weights_.get(), logits_.get(), w.vector(LayerTensor::kRouterBias), n,
            MoeRouteRule{num_experts, k, c.norm_topk_prob, c.moe_router, logit_scale,
                         w.vector(LayerTensor::kExpertScale)},
            stream);
  moe_permute(offsets_.get(), entries_.get(), pick_slot_.get(), slot_expert_.get(), experts_.get(), picks, num_experts,
              stream);
  const bool wait = !(gate_up.is_quantized() && down.is_quantized());
  int touched = 0;
  if (wait) {
    CUDA_CHECK(cudaMemcpyAsync(host_offsets_.get(), offsets_.get(), offsets_.bytes(), cudaMemcpyDeviceToHost, stream));
  } else {
    if (pending_layers_ == c.num_layers) throw Error("moe: more sparse layers in a step than the model has");
    int32_t* slot = pending_offsets_.get() + static_cast<size_t>(pending_layers_++) * (num_experts + 1);
    CUDA_CHECK(cudaMemcpyAsync(slot, offsets_.get(), offsets_.bytes(), cudaMemcpyDeviceToHost, stream));
  }
  moe_gather<T>(rows_.get(), d_h, entries_.get(), picks, k, dim, stream);
  if (wait) {
    CUDA_CHECK(cudaStreamSynchronize(stream));  // the offsets: cuBLAS's row counts
    touched = count_touched(host_offsets_.get());
  }
  profiler.phase("moe_route", stream);

  expert_product(gate_up, gate_up_.get(), rows_.get(), picks, 2 * width, dim, 0, context);
  profiler.phase("moe_gemm_gate_up", stream);
  const GatedParams params{c.swiglu_limit, c.swiglu_alpha, w.expert_vectors[ExpertProduct::kGateUpBias].get(),
                           slot_expert_.get()};
  swiglu<T>(hidden_.get(), gate_up_.get(), picks, width, stream, c.activation, params);
  profiler.phase("moe_swiglu", stream);
  expert_product(down, rows_.get(), hidden_.get(), picks, dim, width, 1, context);
  profiler.phase("moe_gemm_down", stream);

  MoeShared<T> shared;
  if (w.has_shared()) {
    const int sw = c.shared_expert_hidden_dim;
    gemm<T, T>(context.cublas(), stream, shared_gate_up_.get(), d_h, w.linear[LayerProduct::kSharedGateUp].weight.get(),
               n, 2 * sw, dim);
    swiglu<T>(shared_hidden_.get(), shared_gate_up_.get(), n, sw, stream, c.activation,
              GatedParams{c.swiglu_limit, c.swiglu_alpha});
    gemm<T, T>(context.cublas(), stream, shared_out_.get(), shared_hidden_.get(),
               w.linear[LayerTensor::kSharedDown].weight.get(), n, dim, sw);
    shared = MoeShared<T>{shared_out_.get(), d_h, w.vector(LayerTensor::kSharedExpertGate)};
    profiler.phase("moe_shared", stream);
  }
  moe_combine<T>(d_out, rows_.get(), pick_slot_.get(), experts_.get(), weights_.get(),
                 w.expert_vectors[ExpertTensor::kDownBias].get(), shared, n, k, dim, stream);
  profiler.phase("moe_combine", stream);
  return touched;
}

template <typename T>
void MoeFfn<T>::expert_product(const ExpertMatrix<T>& w, T* d_y, const T* d_x, int picks, int n, int k, int table,
                               const CudaContext& context) {
  if constexpr (!std::is_same_v<T, float>) {
    if (w.is_quantized()) {
      return moe_quant_gemm<T>(d_y, d_x, w, offsets_.get(), picks, config_.num_experts, n, k, context.stream());
    }
  }
  gemm_.run(context.cublas(), context.stream(), host_offsets_.get(), d_y, d_x, w.dense.get(), n, k, table);
}

template <typename T>
int MoeFfn<T>::count_touched(const int32_t* offsets) const {
  int touched = 0;
  for (int e = 0; e < config_.num_experts; ++e) touched += offsets[e + 1] > offsets[e];
  return touched;
}

template <typename T>
int MoeFfn<T>::take_touched() {
  int touched = 0;
  for (int l = 0; l < pending_layers_; ++l) {
    touched += count_touched(pending_offsets_.get() + static_cast<size_t>(l) * (config_.num_experts + 1));
  }
  pending_layers_ = 0;
  return touched;
}

template class MoeFfn<float>;
template class MoeFfn<__nv_bfloat16>;
template class MoeFfn<__half>;

}  // namespace cbatch
