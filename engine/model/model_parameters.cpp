// ModelConfig's parameter counts, summed over the tensor table's rows (layer_tensors.hpp): apart from
// model_config.cpp because the table's presence rules and shapes read the config.
#include "engine/model/layer_tensors.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

// Every row of the tensor table a layer has, a sparse layer's routed experts included.
int64_t ModelConfig::layer_parameters() const {
  auto numel = [this](Shape shape, int l = -1) { return size_of(shape.rows, *this, l) * size_of(shape.cols, *this, l); };
  int64_t total = 0;
  for (int l = 0; l < num_layers; ++l) {
    for (const LayerTensorRow& row : layer_tensor_rows()) {
      if (row.present(*this, l)) total += numel(row.shape, l);
    }
    for (const ExpertTensorRow& row : expert_tensor_rows()) {
      if (is_sparse(l) && row.present(*this)) total += int64_t{num_experts} * numel(row.shape);
    }
  }
  return total;
}

// The layers' and the model's own rows (a tied lm_head counted once, as the embedding).
int64_t ModelConfig::num_parameters() const {
  int64_t total = layer_parameters();
  for (const ModelTensorRow& row : model_tensor_rows()) {
    const bool tied = row.kind == ModelTensor::kLmHead && tied_embeddings;
    if (row.present(*this) && !tied) total += size_of(row.shape.rows, *this) * size_of(row.shape.cols, *this);
  }
  return total;
}

}  // namespace cbatch
