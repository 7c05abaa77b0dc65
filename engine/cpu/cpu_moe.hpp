// The CPU backend's mixture-of-experts FFN, grouped by expert: route every row of the step (one router
// product plus its bias, then the family's rule per row: softmax then top-k, or top-k then softmax), group
// the (row, k) picks by expert, run the picked experts' gate|up and down products (and their biases) over
// their gathered rows in one pass over the thread pool (cpu_moe_experts.hpp), each result to a (row, k)
// buffer, and sum each row's k contributions in k order (plus the shared expert).
// A row's output depends only on that row (matmul's per-element order is fixed), so batching never
// changes the bits. Experts no row picked are not touched.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_moe_experts.hpp"
#include "engine/cpu/cpu_ops.hpp"
#include "engine/cpu/cpu_weights.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

class ThreadPool;

struct MoeRouting {
  int num_experts = 0;
  int top_k = 0;
  bool renormalize = false;  // the k chosen probabilities are divided by their sum (kSoftmaxTopk)
  MoeRouter rule = MoeRouter::kSoftmaxTopk;
  const float* expert_scale = nullptr;  // (num_experts) each pick's weight is also times its expert's (Gemma 4)
};

// One row's top_k experts by logit (num_experts logits), highest first, a tie going to the lower expert
// id, into experts (top_k); their weights (top_k): kSoftmaxTopk, their probabilities in the softmax over
// all experts (renormalised when asked); kTopkSoftmax, the softmax over the k chosen logits alone.
void route_row(const float* logits, const MoeRouting& routing, int32_t* experts, float* weights);

// The (row, k) picks grouped by expert (cpu_moe_experts.hpp's ExpertGroups).
ExpertGroups group_by_expert(const int32_t* experts, int num_rows, const MoeRouting& routing);

// Buffers reused across steps and layers.
struct MoeScratch {
  std::vector<float> logits;    // (T, num_experts)
  std::vector<int32_t> experts;  // (T, top_k)
  std::vector<float> weights;   // (T, top_k)
  std::vector<float> picks;     // (T, top_k, dim) each pick's expert output
  std::vector<float> gate_up;   // (T, 2 * shared width) the shared expert's
  std::vector<float> hidden;    // (T, shared width)
  ExpertScratch products;       // the routed experts' products
};

// out (num_rows, dim) = the MoE FFN of h (num_rows, dim) with a sparse layer's weights: its kRouter (and
// kRouterBias), routed experts, and kSharedGateUp, kSharedDown, kSharedExpertGate where it has a shared
// expert. Returns the number of distinct experts the rows picked (the experts whose weights were read).
// `route` (num_rows, dim): the router's input where it is not h (Gemma 4), else nullptr.
int moe_ffn(const float* h, int num_rows, int dim, const CpuLayer& w, const MoeRouting& routing,
            const GluParams& glu, ThreadPool& pool, MoeScratch& s, float* out, const float* route = nullptr);

}  // namespace cbatch
