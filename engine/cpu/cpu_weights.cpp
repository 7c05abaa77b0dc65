// The CPU backend's weights from the tensor table's rows (cpu_weights.hpp).
#include "engine/cpu/cpu_weights.hpp"

#include <cmath>

#include "engine/base/error.hpp"
#include "engine/base/thread_pool.hpp"

namespace cbatch {
namespace {

bool is_matrix(Role role) {
  return role == Role::kProjection || role == Role::kRouter || role == Role::kSharedExpert ||
         role == Role::kRoutedExpert;
}

// The tensors of the rows that join the product `first`, in table order; absent rows left out.
template <typename Row, typename Tensors, typename Kind>
std::vector<const TensorView*> product_parts(Rows<Row> rows, const Tensors& tensors, Kind first) {
  std::vector<const TensorView*> parts;
  for (const Row& row : rows) {
    if (row.joins == first && !tensors[row.kind].empty()) parts.push_back(&tensors[row.kind]);
  }
  return parts;
}

class WeightBuilder {
 public:
  WeightBuilder(const ModelConfig& config, Packing packing, ThreadPool& pool, CpuWeights& weights)
      : config_(config), packing_(packing), pool_(pool), weights_(weights) {}

  // Every product of the rows (a layer's or an expert's): a packed matrix or an fp32 vector.
  template <typename Row, typename Tensors, typename Kept>
  void keep_products(Rows<Row> rows, const Tensors& tensors, Kept& kept) {
    for (const Row& row : rows) {
      if (row.joins != row.kind) continue;  // stacked into its product's first row
      const std::vector<const TensorView*> parts = product_parts(rows, tensors, row.kind);
      if (parts.empty()) continue;
      if (is_matrix(row.role)) {
        kept.matrices[row.kind] = pack(parts, row.role);
      } else {
        kept.vectors[row.kind] = vector(parts, row.role);
      }
    }
  }

  CpuLayer layer(const LayerTensors& t) {
    CpuLayer layer;
    keep_products(layer_tensor_rows(), t, layer);
    for (const ExpertTensors& e : t.experts) keep_products(expert_tensor_rows(), e, layer.experts.emplace_back());
    return layer;
  }

  // The model's own rows: tables as stored, the lm_head packed, the rest fp32.
  void model_rows(const ModelTensors& t) {
    for (const ModelTensorRow& row : model_tensor_rows()) {
      const TensorView& view = t[row.kind];
      if (view.empty()) continue;
      if (row.role == Role::kEmbedding) {
        weights_.tables[row.kind] = view;
      } else if (is_matrix(row.role)) {
        weights_.matrices[row.kind] = pack({&view}, row.role);  // a tied lm_head: the embedding's view
      } else {
        weights_.vectors[row.kind] = vector({&view}, row.role);
      }
    }
  }

 private:
  PackedMatrix pack(const std::vector<const TensorView*>& parts, Role role) {
    Packing packing = role == Role::kRouter ? Packing{packing_.keep_blocks, false, false} : packing_;
    // A routed expert's product takes activations quantized once for all its matrices (cpu_moe_experts.hpp):
    // an act-order expert (inputs permuted, int_codes.hpp) is expanded to fp32 instead.
    for (const TensorView* part : parts) {
      if (role == Role::kRoutedExpert && part->input_order != nullptr) packing.keep_blocks = false;
    }
    PackedMatrix matrix = pack_stacked(parts, pool_, packing);
    if (role == Role::kRoutedExpert) {
      count_expert(matrix);
      weights_.expert_matrix_bytes += static_cast<int64_t>(matrix.bytes());
    } else {
      weights_.matrix_bytes += static_cast<int64_t>(matrix.bytes());
      weights_.matrix_params += matrix.rows() * matrix.cols();
    }
    return matrix;
  }

  std::vector<float> vector(const std::vector<const TensorView*>& parts, Role role) const {
    std::vector<float> values = stack_values(parts);
    if (role == Role::kNorm) {
      for (float& v : values) v += config_.norm_offset;  // Gemma's and Qwen3.5's (1 + w)
    }
    if (role == Role::kDecay && config_.decay_from_log) {
      for (float& v : values) v = -std::exp(v);  // A = -exp(A_log), as llama.cpp's converter stores it
    }
    return values;
  }

  // A routed expert's parameters at the bytes its blocks (or fp32) take, part by part.
  void count_expert(const PackedMatrix& w) {
    for (const PackedMatrix& part : w.parts()) count_expert(part);
    if (!w.parts().empty()) return;
    const double params = static_cast<double>(w.rows() * w.cols());
    const DType dtype = w.is_blocked() ? w.dtype() : DType::kF32;
    weights_.expert_bytes += params * static_cast<double>(dtype_block_bytes(dtype)) /
                             static_cast<double>(dtype_block_elems(dtype));
    weights_.expert_params += params;
  }

  const ModelConfig& config_;
  Packing packing_;
  ThreadPool& pool_;
  CpuWeights& weights_;
};

}  // namespace

CpuWeights load_cpu_weights(const ModelConfig& config, ModelTensors tensors, Packing packing, ThreadPool& pool) {
  if (static_cast<int>(tensors.layers.size()) != config.num_layers) {
    throw Error("internal error: " + std::to_string(tensors.layers.size()) + " layers of tensors, the config says " +
                std::to_string(config.num_layers));
  }
  CpuWeights weights;
  WeightBuilder builder(config, packing, pool, weights);
  for (LayerTensors& t : tensors.layers) {
    weights.layers.push_back(builder.layer(t));
    t = LayerTensors{};  // its buffers freed here when these were their last views
  }
  builder.model_rows(tensors);
  return weights;
}

}  // namespace cbatch
