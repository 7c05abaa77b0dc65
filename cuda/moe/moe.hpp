// Host launchers of the mixture-of-experts kernels (moe.cu): routing on the device, the permutation of the
// (row, k) picks by expert, the gather of rows into expert segments, and the fused un-permute + weighted
// sum. The expert products between gather and combine are grouped GEMMs (moe_gemm.hpp). A pick is
// row * top_k + k; a slot is a pick's row in the permuted order (expert-major, pick order within).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/model/model_config.hpp"

namespace cbatch {

// The most experts a layer may have here (the permutation's shared counters); backend_checks refuses more.
constexpr int kMoeMaxExperts = 512;

struct MoeRouteRule {
  int num_experts = 0;
  int top_k = 0;
  bool renormalize = false;                  // norm_topk_prob (kSoftmaxTopk only)
  MoeRouter router = MoeRouter::kSoftmaxTopk;
  float logit_scale = 1.0f;             // the logits times it before anything (Gemma 4's router: dim^-1/2)
  const float* expert_scale = nullptr;  // (num_experts) fp32 or null: each pick's weight times its expert's
};

// experts (num_rows, top_k), weights (num_rows, top_k) fp32 = each row's picks from logits (num_rows,
// num_experts) fp32 times the rule's logit scale plus bias (num_experts, or null): the decisions of
// engine/cpu/cpu_moe.cpp's route_row, each weight then times its expert's scale where the rule has them.
void moe_route(int32_t* d_experts, float* d_weights, const float* d_logits, const float* d_bias, int num_rows,
               const MoeRouteRule& rule, cudaStream_t stream);

// The counting sort of num_picks picks (experts (num_picks)) by expert, stable: offsets (num_experts + 1),
// entries (num_picks) the pick at each slot, pick_slot (num_picks) each pick's slot, slot_expert (num_picks).
void moe_permute(int32_t* d_offsets, int32_t* d_entries, int32_t* d_pick_slot, int32_t* d_slot_expert,
                 const int32_t* d_experts, int num_picks, int num_experts, cudaStream_t stream);

// rows (num_picks, dim) T: rows[slot] = h[entries[slot] / top_k].
template <typename T>
void moe_gather(T* d_rows, const T* d_h, const int32_t* d_entries, int num_picks, int top_k, int dim,
                cudaStream_t stream);

// The shared expert's part of the combine (Qwen2-MoE), all null without one: its output (num_rows, dim),
// the normed layer input h (num_rows, dim) and its gate vector (dim) fp32; the row's part is
// sigmoid(h . gate) * out.
template <typename T>
struct MoeShared {
  const T* d_out = nullptr;
  const T* d_h = nullptr;
  const float* d_gate = nullptr;
};

// out (num_rows, dim) T = shared part + sum over k, in k order, of weights[row, k] * (expert_out[slot of
// (row, k)] + down_bias[expert of (row, k)]), in fp32; expert_out (num_picks, dim) T; down_bias
// (num_experts, dim) fp32 or null.
template <typename T>
void moe_combine(T* d_out, const T* d_expert_out, const int32_t* d_pick_slot, const int32_t* d_experts,
                 const float* d_weights, const float* d_down_bias, const MoeShared<T>& shared, int num_rows,
                 int top_k, int dim, cudaStream_t stream);

}  // namespace cbatch
