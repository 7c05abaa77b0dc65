// Gemma 4's MoE block on the CPU (cpu_forward.hpp), transformers' Gemma4TextDecoderLayer with
// enable_moe_block: with the dense MLP's output in delta_ (of pre_ffn_norm(x)), delta_ = post_norm_1(delta_) +
// post_norm_2(experts(pre_norm_2(x))), the router reading rmsnorm(x) * router_scale * dim^-1/2, its top k
// renormalised and each pick's weight times its expert's scale (the MoE path of cpu_moe.hpp). Per row.
#include <cmath>

#include "engine/cpu/cpu_forward.hpp"

namespace cbatch {

int CpuBackend::experts_beside_dense(int num_tokens, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int dim = config_.dim;
  const size_t n = static_cast<size_t>(num_tokens) * dim;
  moe_route_.resize(n);
  moe_out_.resize(n);
  const float* post_1 = layer.vector(LayerTensor::kPostFfnNorm1).data();
  const float* pre_2 = layer.vector(LayerTensor::kPreFfnNorm2).data();
  const std::vector<float>& scale = layer.vector(LayerTensor::kRouterScale);
  const float root = 1.0f / std::sqrt(static_cast<float>(dim));
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      rmsnorm_row(&delta_[r * dim], post_1, &delta_[r * dim], dim, config_.rms_eps);
      float* route = &moe_route_[r * dim];
      rmsnorm_row(&x_[r * dim], nullptr, route, dim, config_.rms_eps);
      for (int i = 0; i < dim; ++i) route[i] = route[i] * scale[i] * root;
      rmsnorm_row(&x_[r * dim], pre_2, &h_[r * dim], dim, config_.rms_eps);
    }
  }, 1, min_parallel_items(2.0 * dim));
  MoeRouting routing{config_.num_experts, config_.experts_per_token, config_.norm_topk_prob, config_.moe_router};
  routing.expert_scale = layer.vector(LayerTensor::kExpertScale).data();
  const int touched = moe_ffn(h_.data(), num_tokens, dim, layer, routing, glu_params(config_), pool_, moe_scratch_,
                              moe_out_.data(), moe_route_.data());
  const float* post_2 = layer.vector(LayerTensor::kPostFfnNorm2).data();
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      rmsnorm_row(&moe_out_[r * dim], post_2, &moe_out_[r * dim], dim, config_.rms_eps);
      for (int i = 0; i < dim; ++i) delta_[r * dim + i] += moe_out_[r * dim + i];
    }
  }, 1, min_parallel_items(1.0 * dim));
  return touched;
}

}  // namespace cbatch
