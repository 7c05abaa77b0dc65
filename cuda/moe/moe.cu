// The mixture-of-experts kernels around the expert GEMMs. moe_route: one thread a row, the CPU's serial
// top-k and softmax (experts are few: a row's scan is a few thousand compares). moe_permute: one block of up
// to 1024 threads (permute_threads), a two-pass counting sort by expert (per-warp counts, __match_any_sync
// ranks), stable in pick order. moe_gather and moe_combine: one block a row, a strided loop over dim. The block code is in
// moe_block.cuh. Layouts: logits (rows, experts) fp32; experts, weights (rows, top_k); rows of T.
#include "cuda/moe/moe.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/moe/moe_block.cuh"

namespace cbatch {

using namespace moe_detail;
static_assert(kMoeMaxExperts == moe_detail::kMaxExperts);

__global__ void __launch_bounds__(kRouteThreads)
    moe_route_kernel(const float* __restrict__ logits, const float* __restrict__ bias, RouteRule rule, int num_rows,
                     int32_t* __restrict__ experts, float* __restrict__ weights) {
  moe_route_block(logits, bias, rule, num_rows, experts, weights);
}

__global__ void __launch_bounds__(kPermuteMaxThreads)
    moe_permute_kernel(const int32_t* __restrict__ experts, int num_picks, int num_experts,
                       int32_t* __restrict__ offsets, int32_t* __restrict__ entries, int32_t* __restrict__ pick_slot,
                       int32_t* __restrict__ slot_expert) {
  moe_permute_block(experts, num_picks, num_experts, offsets, entries, pick_slot, slot_expert);
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    moe_gather_kernel(T* __restrict__ rows, const T* __restrict__ h, const int32_t* __restrict__ entries, int top_k,
                      int dim) {
  moe_gather_block(rows, h, entries, top_k, dim);
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    moe_combine_kernel(T* __restrict__ out, const T* __restrict__ expert_out, const int32_t* __restrict__ pick_slot,
                       const int32_t* __restrict__ experts, const float* __restrict__ weights,
                       const float* __restrict__ down_bias, SharedExpertOut<T> shared, int top_k, int dim) {
  moe_combine_block(out, expert_out, pick_slot, experts, weights, down_bias, shared, top_k, dim);
}

static void check_experts(const char* op, int num_experts, int top_k) {
  if (num_experts <= 0 || num_experts > kMaxExperts || top_k <= 0 || top_k > num_experts) {
    throw Error(std::string(op) + ": bad routing sizes num_experts=" + std::to_string(num_experts) +
                " top_k=" + std::to_string(top_k) + " (at most " + std::to_string(kMaxExperts) + " experts)");
  }
}

void moe_route(int32_t* d_experts, float* d_weights, const float* d_logits, const float* d_bias, int num_rows,
               const MoeRouteRule& rule, cudaStream_t stream) {
  check_experts("moe_route", rule.num_experts, rule.top_k);
  if (num_rows < 0) throw Error("moe_route: bad num_rows " + std::to_string(num_rows));
  if (num_rows == 0) return;
  const RouteRule r{rule.num_experts, rule.top_k, rule.renormalize, rule.router == MoeRouter::kTopkSoftmax,
                    rule.logit_scale, rule.expert_scale};
  const unsigned blocks = static_cast<unsigned>((num_rows + kRouteThreads - 1) / kRouteThreads);
  moe_route_kernel<<<blocks, kRouteThreads, 0, stream>>>(d_logits, d_bias, r, num_rows, d_experts, d_weights);
  CUDA_CHECK_LAUNCH();
}

void moe_permute(int32_t* d_offsets, int32_t* d_entries, int32_t* d_pick_slot, int32_t* d_slot_expert,
                 const int32_t* d_experts, int num_picks, int num_experts, cudaStream_t stream) {
  check_experts("moe_permute", num_experts, 1);
  if (num_picks < 0) throw Error("moe_permute: bad num_picks " + std::to_string(num_picks));
  // Even with no picks the offsets are written (all zero), so the host's copy of them is always valid.
  moe_permute_kernel<<<1, permute_threads(num_experts), 0, stream>>>(d_experts, num_picks, num_experts, d_offsets, d_entries,
                                                        d_pick_slot, d_slot_expert);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void moe_gather(T* d_rows, const T* d_h, const int32_t* d_entries, int num_picks, int top_k, int dim,
                cudaStream_t stream) {
  if (num_picks < 0 || top_k <= 0 || dim <= 0) {
    throw Error("moe_gather: bad sizes num_picks=" + std::to_string(num_picks) + " top_k=" + std::to_string(top_k) +
                " dim=" + std::to_string(dim));
  }
  if (num_picks == 0) return;
  moe_gather_kernel<T><<<num_picks, kRowThreads, 0, stream>>>(d_rows, d_h, d_entries, top_k, dim);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void moe_combine(T* d_out, const T* d_expert_out, const int32_t* d_pick_slot, const int32_t* d_experts,
                 const float* d_weights, const float* d_down_bias, const MoeShared<T>& shared, int num_rows,
                 int top_k, int dim, cudaStream_t stream) {
  if (num_rows < 0 || top_k <= 0 || dim <= 0) {
    throw Error("moe_combine: bad sizes num_rows=" + std::to_string(num_rows) + " top_k=" + std::to_string(top_k) +
                " dim=" + std::to_string(dim));
  }
  if ((shared.d_out == nullptr) != (shared.d_h == nullptr) || (shared.d_out == nullptr) != (shared.d_gate == nullptr)) {
    throw Error("moe_combine: a shared expert needs its output, the layer input and its gate");
  }
  if (num_rows == 0) return;
  const SharedExpertOut<T> s{shared.d_out, shared.d_h, shared.d_gate};
  moe_combine_kernel<T><<<num_rows, kRowThreads, 0, stream>>>(d_out, d_expert_out, d_pick_slot, d_experts, d_weights,
                                                              d_down_bias, s, top_k, dim);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_MOE(T)                                                                          \
  template void moe_gather<T>(T*, const T*, const int32_t*, int, int, int, cudaStream_t);                  \
  template void moe_combine<T>(T*, const T*, const int32_t*, const int32_t*, const float*, const float*,   \
                               const MoeShared<T>&, int, int, int, cudaStream_t);
CBATCH_INSTANTIATE_MOE(float)
CBATCH_INSTANTIATE_MOE(__nv_bfloat16)
CBATCH_INSTANTIATE_MOE(__half)
#undef CBATCH_INSTANTIATE_MOE

}  // namespace cbatch
