// The CPU backend's mixture-of-experts FFN, grouped by expert: route every row of the step (one router
// product, then softmax and top-k per row), group the (row, k) picks by expert, run each picked expert's
// gate|up and down products once over its gathered rows with the batch-invariant matmul, scatter the
// results to a (row, k) buffer, and sum each row's k contributions in k order (plus the shared expert).
// A row's output depends only on that row (matmul's per-element order is fixed), so batching never
// changes the bits. Experts no row picked are not touched.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_matmul.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

class ThreadPool;

// One sparse layer's weights, packed for matmul.
struct MoeWeights {
  PackedMatrix router;                // (num_experts, dim)
  std::vector<PackedMatrix> gate_up;  // (num_experts) of (2 * expert_hidden, dim): [gate | up]
  std::vector<PackedMatrix> down;     // (num_experts) of (dim, expert_hidden)
  PackedMatrix shared_gate_up;        // (2 * shared_hidden, dim), or empty: no shared expert
  PackedMatrix shared_down;           // (dim, shared_hidden)
  std::vector<float> shared_gate;     // (dim) the shared expert's sigmoid gate, or empty
};

struct MoeRouting {
  int num_experts = 0;
  int top_k = 0;
  bool renormalize = false;  // the k chosen probabilities are divided by their sum
};

// Softmax of one row's logits (num_experts), then the top_k experts by probability, highest first, a tie
// going to the lower expert id; experts (top_k) and weights (top_k) receive them.
void route_row(const float* logits, const MoeRouting& routing, int32_t* experts, float* weights);

// (row, k) picks grouped by expert: the picks of expert e are entries[offsets[e] .. offsets[e + 1]),
// each row * top_k + k, in row order.
struct ExpertGroups {
  std::vector<int32_t> offsets;  // (num_experts + 1)
  std::vector<int32_t> entries;  // (num_rows * top_k)
};
ExpertGroups group_by_expert(const int32_t* experts, int num_rows, const MoeRouting& routing);

// Buffers reused across steps and layers.
struct MoeScratch {
  std::vector<float> logits;    // (T, num_experts)
  std::vector<int32_t> experts;  // (T, top_k)
  std::vector<float> weights;   // (T, top_k)
  std::vector<float> rows_in;   // (rows of an expert, dim) gathered input
  std::vector<float> gate_up;   // (rows, 2 * width)
  std::vector<float> hidden;    // (rows, width)
  std::vector<float> rows_out;  // (rows, dim)
  std::vector<float> picks;     // (T, top_k, dim) each pick's expert output
};

// out (num_rows, dim) = the MoE FFN of h (num_rows, dim). Returns the number of distinct experts the rows
// picked (the experts whose weights were read).
int moe_ffn(const float* h, int num_rows, int dim, const MoeWeights& w, const MoeRouting& routing,
             Activation activation, ThreadPool& pool, MoeScratch& s, float* out);

}  // namespace cbatch
