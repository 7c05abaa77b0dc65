// Gemma 4's per-layer inputs and layer tail in a CUDA backend step (cuda_forward.hpp), as the CPU's
// cpu_per_layer_input.cpp: after the embedding, every row's inputs of every layer, (table[token] * sqrt(P) +
// norm_P(proj(x) / sqrt(dim))) / sqrt(2); at the end of layer l, x += post_ffn_norm(FFN output), then
// x += norm(proj_l(act(gate_l x) * inputs[l])), then x *= layer_scalar_l. A model with either part adds its
// layers' outputs to x itself (adds_own_output), so the next norm adds no delta. And the MoE block beside
// the dense MLP (26B-A4B): the experts of moe_ffn.hpp on their own norm of x, their output and the MLP's
// each normed and summed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/backend/cuda_forward.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/elementwise/rmsnorm.hpp"
#include "cuda/elementwise/per_layer_input.hpp"
#include "cuda/gemm/gemm.hpp"

namespace cbatch {

template <typename T>
void CudaBackend<T>::run_per_layer_inputs(const BatchIndices& idx, int n) {
  const int p = config_.per_layer_dim;
  if (p == 0) return;
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int all = config_.num_layers * p;
  // The scaled embedding in T for the projection (h is free until the first layer's norm).
  residual_tail<T>(ws.x.get(), nullptr, nullptr, nullptr, ws.h.get(), n, config_.dim, config_.rms_eps, stream);
  gemm<T, float>(context_.cublas(), stream, ws.per_layer_in.get(), ws.h.get(),
                 weights_.tables[ModelTensor::kPerLayerModelProj].get(), n, all, config_.dim);
  per_layer_inputs<T>(ws.per_layer_in.get(), ws.per_layer_in.get(),  // in place
                      weights_.tables[ModelTensor::kPerLayerEmbedding].get(), idx.tokens,
                      weights_.vectors[ModelTensor::kPerLayerProjNorm].get(), n, config_.num_layers, p, config_.dim,
                      config_.rms_eps, stream);
  profiler_.phase("per_layer_inputs", stream);
}

template <typename T>
void CudaBackend<T>::finish_layer(int layer, int n) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int p = config_.per_layer_dim, dim = config_.dim;
  const float eps = config_.rms_eps;
  const float* scalar = w.vector(LayerTensor::kLayerScalar);  // null: none
  if (p == 0) {
    residual_tail<T>(ws.x.get(), ws.delta.get(), sublayer_out(layer, true).post_norm, scalar, nullptr, n, dim, eps, stream);
    profiler_.phase("layer_tail", stream);
    return;
  }
  residual_tail<T>(ws.x.get(), ws.delta.get(), sublayer_out(layer, true).post_norm, nullptr, ws.h.get(), n, dim, eps, stream);
  linear_.forward(w.linear[LayerTensor::kPerLayerGate], ws.per_layer_gate.get(), ws.h.get(), n);
  per_layer_gate<T>(ws.per_layer_gate.get(), ws.per_layer_in.get(), layer, n, config_.num_layers, p,
                    config_.activation, stream);
  linear_.forward(w.linear[LayerTensor::kPerLayerProj], ws.delta.get(), ws.per_layer_gate.get(), n);
  residual_tail<T>(ws.x.get(), ws.delta.get(), w.vector(LayerTensor::kPerLayerNorm), scalar, nullptr, n, dim, eps,
                   stream);
  profiler_.phase("layer_tail", stream);
}

template <typename T>
void CudaBackend<T>::run_experts_beside_dense(int layer, int n) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int dim = config_.dim;
  const float eps = config_.rms_eps;
  // x already holds the attention's output: the experts' input and the router's are norms of it.
  rmsnorm_residual<T>(ws.experts_in.get(), ws.x.get(), nullptr, w.vector(LayerTensor::kPreFfnNorm2), n, dim, eps,
                      stream);
  rmsnorm_residual<T>(ws.router_in.get(), ws.x.get(), nullptr, w.vector(LayerTensor::kRouterScale), n, dim, eps,
                      stream);
  experts_touched_ += moe_.forward(w, ws.experts_in.get(), n, ws.experts_out.get(), context_, profiler_,
                                   ws.router_in.get());
  // The two outputs normed and summed in fp32, rounded once into delta (the layer tail's post-FFN norm next).
  CUDA_CHECK(cudaMemsetAsync(ws.ffn_sum.get(), 0, sizeof(float) * static_cast<size_t>(n) * dim, stream));
  residual_tail<T>(ws.ffn_sum.get(), ws.delta.get(), w.vector(LayerTensor::kPostFfnNorm1), nullptr, nullptr, n, dim,
                   eps, stream);
  residual_tail<T>(ws.ffn_sum.get(), ws.experts_out.get(), w.vector(LayerTensor::kPostFfnNorm2), nullptr,
                   ws.delta.get(), n, dim, eps, stream);
  profiler_.phase("moe_beside_dense", stream);
}

#define CBATCH_INSTANTIATE_PER_LAYER_STEP(T)                                   \
  template void CudaBackend<T>::run_per_layer_inputs(const BatchIndices&, int); \
  template void CudaBackend<T>::finish_layer(int, int);                         \
  template void CudaBackend<T>::run_experts_beside_dense(int, int);
CBATCH_INSTANTIATE_PER_LAYER_STEP(float)
CBATCH_INSTANTIATE_PER_LAYER_STEP(__nv_bfloat16)
CBATCH_INSTANTIATE_PER_LAYER_STEP(__half)
#undef CBATCH_INSTANTIATE_PER_LAYER_STEP

}  // namespace cbatch
