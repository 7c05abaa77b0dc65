// The hardware limit of an engine step: the bytes it must move (weights once, each sequence's KV cache
// read once, new KV written once) and the flops it must do (2 x parameters x useful tokens, plus
// attention), against a device's measured copy bandwidth and matrix throughput. bench sums
// max(bytes / B, flops / F) over the steps and divides by wall time: the roofline fraction. A mixture of
// experts reads only the experts the step touched (router, attention, shared expert and dense layers
// always), each at the bytes per parameter its experts are stored in (MXFP4 17/32, FP8 1 + its row scales,
// Q8_0 34/32, else the weights' own), and a row multiplies by its experts_per_token experts only.
#pragma once
#include "engine/model/model_config.hpp"
#include "engine/backend/ragged_batch.hpp"

namespace cbatch {

struct DevicePeaks {
  double bytes_per_s = 0;   // device-to-device copy, bytes read + bytes written per second
  double flops_per_s = 0;   // large GEMM in the compute dtype
  bool valid() const { return bytes_per_s > 0 && flops_per_s > 0; }
};

struct StepCost {
  double bytes = 0;
  double expert_bytes = 0;  // the routed experts' part of bytes
  double flops = 0;
};

class CostModel {
 public:
  // expert_bytes_per_param < 0: the experts are stored as the other weights.
  CostModel(const ModelConfig& config, double weight_bytes_per_param, double kv_bytes_per_elem,
            double expert_bytes_per_param = -1);
  // Useful work only: padding rows (slot -1) are waste, not part of the limit. experts_touched: the
  // backend's StepResult::experts_touched (distinct experts summed over sparse layers); -1 counts every expert.
  StepCost step_cost(const RaggedBatch& batch, int experts_touched = -1) const;
  static double roofline_seconds(const StepCost& cost, const DevicePeaks& peaks);

 private:
  ModelConfig config_;
  double layer_params_ = 0;        // parameters of all transformer layers
  double weight_bytes_ = 0;        // bytes of the layer weights and the final norm, experts excluded
  double expert_params_ = 0;       // parameters of one routed expert (gate, up, down)
  double expert_bytes_per_param_ = 0;
  int num_sparse_layers_ = 0;
  double row_params_ = 0;          // layer parameters one row multiplies by (only its top-k experts)
  double lm_head_bytes_ = 0;
  double kv_bytes_per_token_ = 0;  // K and V of one token over all layers
};

}  // namespace cbatch
