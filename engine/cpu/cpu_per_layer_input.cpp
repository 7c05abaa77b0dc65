// Gemma 4's per-layer inputs on the CPU (cpu_forward.hpp), transformers' get_per_layer_inputs,
// project_per_layer_inputs and the decoder layer's tail: per row, per_layer_in_ (T, num_layers *
// per_layer_dim) = (table[token] * sqrt(P) + norm_P(proj(x_embedded) / sqrt(dim))) / sqrt(2), then after layer
// l's FFN x += norm(proj_l(act(gate_l x) * per_layer_in_[l])), and x *= layer_scalar_l. Per row, so it does
// not depend on batching.
#include <cmath>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_forward.hpp"
#include "engine/cpu/cpu_matmul.hpp"

namespace cbatch {
namespace {

float activate(float x, Activation activation) {
  switch (activation) {
    case Activation::kGeluTanh: return gelu_tanh(x);
    case Activation::kGeluErf: return gelu_erf(x);
    default: return x / (1.0f + std::exp(-x));
  }
}

}  // namespace

void CpuBackend::per_layer_inputs(const RaggedBatch& batch) {
  const int num_tokens = batch.num_tokens(), p = config_.per_layer_dim, dim = config_.dim;
  if (p == 0) return;
  const int64_t all = static_cast<int64_t>(config_.num_layers) * p;
  per_layer_in_.resize(static_cast<size_t>(num_tokens * all));
  per_layer_tok_.resize(static_cast<size_t>(num_tokens * all));
  matmul(x_.data(), weights_.matrices[ModelTensor::kPerLayerModelProj], per_layer_in_.data(), num_tokens, pool_);
  const TensorView& table = weights_.tables[ModelTensor::kPerLayerEmbedding];
  const float* norm = weights_.vectors[ModelTensor::kPerLayerProjNorm].data();
  const float projection_scale = 1.0f / std::sqrt(static_cast<float>(dim));
  const float table_scale = std::sqrt(static_cast<float>(p)), input_scale = 1.0f / std::sqrt(2.0f);
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* in = &per_layer_in_[r * all];
      float* tok = &per_layer_tok_[r * all];
      tensor_rows_to_f32(table, batch.token_ids[r], 1, tok);
      for (int64_t i = 0; i < all; ++i) in[i] *= projection_scale;
      for (int l = 0; l < config_.num_layers; ++l) rmsnorm_row(in + l * p, norm, in + l * p, p, config_.rms_eps);
      for (int64_t i = 0; i < all; ++i) in[i] = (in[i] + tok[i] * table_scale) * input_scale;
    }
  }, 1, min_parallel_items(4.0 * all));
}

void CpuBackend::finish_layer(int num_tokens, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int dim = config_.dim, p = config_.per_layer_dim;
  if (p > 0) {
    const int64_t all = static_cast<int64_t>(config_.num_layers) * p;
    matmul(x_.data(), layer.matrix(LayerTensor::kPerLayerGate), ff_.data(), num_tokens, pool_);
    for (int64_t r = 0; r < num_tokens; ++r) {
      float* g = &ff_[r * p];
      const float* in = &per_layer_in_[r * all + static_cast<int64_t>(l) * p];
      for (int i = 0; i < p; ++i) g[i] = activate(g[i], config_.activation) * in[i];
    }
    matmul(ff_.data(), layer.matrix(LayerTensor::kPerLayerProj), delta_.data(), num_tokens, pool_);
    add_sublayer_output(num_tokens, layer.vector(LayerTensor::kPerLayerNorm), {}, {});
  }
  const std::vector<float>& scalar = layer.vector(LayerTensor::kLayerScalar);
  if (scalar.empty()) return;
  for (size_t i = 0; i < static_cast<size_t>(num_tokens) * dim; ++i) x_[i] *= scalar[0];
}

}  // namespace cbatch
