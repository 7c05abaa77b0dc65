#include "engine/backend/roofline.hpp"

#include <algorithm>

namespace cbatch {

CostModel::CostModel(const ModelConfig& config, double weight_bytes_per_param, double kv_bytes_per_elem,
                     double expert_bytes_per_param)
    : config_(config) {
  const double embed = static_cast<double>(config.vocab_size) * config.dim;
  layer_params_ = static_cast<double>(config.layer_parameters());
  for (int l = 0; l < config.num_layers; ++l) num_sparse_layers_ += config.is_sparse(l) ? 1 : 0;
  expert_params_ = 3.0 * config.dim * config.expert_hidden_dim;
  const double all_experts = expert_params_ * config.num_experts * num_sparse_layers_;
  row_params_ = layer_params_ - expert_params_ * (config.num_experts - config.experts_per_token) * num_sparse_layers_;
  expert_bytes_per_param_ = expert_bytes_per_param >= 0 ? expert_bytes_per_param : weight_bytes_per_param;
  weight_bytes_ = (layer_params_ - all_experts + config.dim) * weight_bytes_per_param;
  lm_head_bytes_ = config.has_lm_head ? embed * weight_bytes_per_param : 0;
  kv_bytes_per_token_ = 2.0 * config.num_layers * config.kv_dim() * kv_bytes_per_elem;
}

StepCost CostModel::step_cost(const RaggedBatch& batch, int experts_touched) const {
  double useful_rows = 0, attention_positions = 0;  // keys each useful row attends to, summed
  for (int r = 0; r < batch.num_tokens(); ++r) {
    if (batch.slot_mapping[r] < 0) continue;
    useful_rows += 1;
    attention_positions += batch.positions[r] + 1;
  }
  if (config_.bidirectional) {  // an encoder's rows each attend to the whole sequence
    attention_positions = 0;
    for (int s = 0; s < batch.num_seqs(); ++s) {
      attention_positions += static_cast<double>(batch.query_start[s + 1] - batch.query_start[s]) * batch.seq_lens[s];
    }
  }
  double kv_read_tokens = 0;
  for (int32_t len : batch.seq_lens) kv_read_tokens += len;
  const double logits = batch.num_logits();
  StepCost cost;
  const double experts =
      experts_touched >= 0 ? experts_touched : static_cast<double>(config_.num_experts) * num_sparse_layers_;
  cost.expert_bytes = experts * expert_params_ * expert_bytes_per_param_;
  cost.bytes = weight_bytes_ + cost.expert_bytes + (logits > 0 ? lm_head_bytes_ : 0) +
               kv_read_tokens * kv_bytes_per_token_ + useful_rows * kv_bytes_per_token_;
  const double attention_flops = 4.0 * config_.num_layers * config_.num_heads * config_.head_dim * attention_positions;
  cost.flops = 2.0 * row_params_ * useful_rows + 2.0 * config_.vocab_size * config_.dim * logits + attention_flops;
  return cost;
}

double CostModel::roofline_seconds(const StepCost& cost, const DevicePeaks& peaks) {
  if (!peaks.valid()) return 0;
  return std::max(cost.bytes / peaks.bytes_per_s, cost.flops / peaks.flops_per_s);
}

}  // namespace cbatch
