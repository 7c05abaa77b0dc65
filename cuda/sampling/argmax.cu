// Argmax per logits row for greedy sampling, so only the ids travel back to the host. One block of 256
// threads per row: each thread scans a strided slice keeping (value, index), then a warp shuffle and a
// shared-memory step reduce the pairs. Ties resolve to the lowest index at every step.
#include "cuda/sampling/argmax.hpp"

#include <climits>
#include <string>

#include "cuda/common/cuda_check.hpp"

namespace cbatch {

constexpr int kArgmaxThreads = 256;

// Replaces (best, best_index) by (value, index) when it is larger, or equal with a lower index.
// A NaN value compares false and never wins.
__device__ __forceinline__ void keep_better(float& best, int& best_index, float value, int index) {
  if (value > best || (value == best && index < best_index)) {
    best = value;
    best_index = index;
  }
}

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(int32_t* __restrict__ out,          // (num_rows)
                  const float* __restrict__ logits,   // (num_rows, vocab)
                  int vocab) {
  __shared__ float s_best[kArgmaxThreads / 32];
  __shared__ int s_index[kArgmaxThreads / 32];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  float best = -INFINITY;
  int best_index = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) keep_better(best, best_index, row[i], i);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    keep_better(best, best_index, other, other_index);
  }
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) {
    s_best[warp] = best;
    s_index[warp] = best_index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w) keep_better(best, best_index, s_best[w], s_index[w]);
    out[blockIdx.x] = best_index == INT_MAX ? 0 : best_index;
  }
}

void argmax(int32_t* d_out, const float* d_logits, int num_rows, int vocab, cudaStream_t stream) {
  if (num_rows < 0 || vocab <= 0) {
    throw Error("argmax: bad sizes num_rows=" + std::to_string(num_rows) + " vocab=" + std::to_string(vocab));
  }
  if (num_rows == 0) return;
  argmax_kernel<<<num_rows, kArgmaxThreads, 0, stream>>>(d_out, d_logits, vocab);
  CUDA_CHECK_LAUNCH();
}

}  // namespace cbatch
