// The gated DeltaNet layer's steps between its products (deltanet.hpp): one launch each; the block code is
// deltanet_block.cuh. The conv runs a thread per channel and the delta rule a block per (sequence, value
// head), both over the sequence's rows in token order (decode and prefill alike: one token is a sequence of
// one row); the norms and gates a block per row.
#include "cuda/recurrent/deltanet.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/recurrent/deltanet_block.cuh"

namespace cbatch {

using namespace deltanet_detail;

namespace {

template <typename T>
__global__ void __launch_bounds__(kConvThreads)
    conv_kernel(float* __restrict__ out, const T* __restrict__ proj, const float* __restrict__ taps, DeltaNetSizes d,
                DeltaNetSeqs seqs, DeltaNetStates states) {
  conv_block<T>(out, proj, taps, d, seqs, states);
}

template <typename T>
__global__ void __launch_bounds__(kGateThreads)
    gates_kernel(float* __restrict__ conv_out, float* __restrict__ gates, const T* __restrict__ ba,
                 const float* __restrict__ decay, const float* __restrict__ dt_bias, DeltaNetSizes d) {
  gates_block<T>(conv_out, gates, ba, decay, dt_bias, d);
}

__global__ void delta_rule_kernel(float* __restrict__ core, const float* __restrict__ conv_out,
                                  const float* __restrict__ gates, DeltaNetSizes d, DeltaNetSeqs seqs,
                                  DeltaNetStates states) {
  extern __shared__ float smem[];
  delta_rule_block(core, conv_out, gates, d, seqs, states, smem);
}

template <typename T>
__global__ void __launch_bounds__(kNormThreads)
    gated_norm_kernel(T* __restrict__ out, const float* __restrict__ core, const T* __restrict__ proj,
                      const float* __restrict__ weight, DeltaNetSizes d, float eps) {
  gated_norm_block<T>(out, core, proj, weight, d, eps);
}

__global__ void decay_from_log_kernel(float* decay, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) decay[i] = -expf(decay[i]);
}

void check_dims(const char* op, const DeltaNetSizes& d) {
  if (d.num_k_heads <= 0 || d.num_v_heads <= 0 || d.num_v_heads % d.num_k_heads != 0 || d.k_head_dim <= 0 ||
      d.v_head_dim <= 0 || d.conv_kernel < 1 || d.conv_kernel > kMaxConvKernel) {
    throw Error(std::string(op) + ": bad DeltaNet sizes (key heads " + std::to_string(d.num_k_heads) +
                ", value heads " + std::to_string(d.num_v_heads) + ", head dims " + std::to_string(d.k_head_dim) +
                "/" + std::to_string(d.v_head_dim) + ", conv kernel " + std::to_string(d.conv_kernel) + ")");
  }
}

// Threads of a delta-rule block: a column per thread, whole warps; shared bytes: S, q and k.
int delta_rule_threads(const DeltaNetSizes& d) { return (d.v_head_dim + 31) / 32 * 32; }
size_t delta_rule_smem(const DeltaNetSizes& d) {
  return sizeof(float) * static_cast<size_t>(d.k_head_dim) * (d.v_head_dim + 2);
}

}  // namespace

template <typename T>
void deltanet_conv(float* d_conv_out, const T* d_proj, const float* d_taps, const DeltaNetSizes& dims,
                   const DeltaNetSeqs& seqs, int num_seqs, const DeltaNetStates& states, cudaStream_t stream) {
  check_dims("deltanet_conv", dims);
  if (num_seqs == 0) return;
  const dim3 grid(num_seqs, (dims.conv_dim() + kConvThreads - 1) / kConvThreads);
  conv_kernel<T><<<grid, kConvThreads, 0, stream>>>(d_conv_out, d_proj, d_taps, dims, seqs, states);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void deltanet_gates(float* d_conv_out, float* d_gates, const T* d_ba, const float* d_decay, const float* d_dt_bias,
                    const DeltaNetSizes& dims, int num_rows, cudaStream_t stream) {
  check_dims("deltanet_gates", dims);
  if (num_rows == 0) return;
  gates_kernel<T><<<num_rows, kGateThreads, 0, stream>>>(d_conv_out, d_gates, d_ba, d_decay, d_dt_bias, dims);
  CUDA_CHECK_LAUNCH();
}

void deltanet_delta_rule(float* d_core, const float* d_conv_out, const float* d_gates, const DeltaNetSizes& dims,
                         const DeltaNetSeqs& seqs, int num_seqs, const DeltaNetStates& states, cudaStream_t stream) {
  check_dims("deltanet_delta_rule", dims);
  if (num_seqs == 0) return;
  const size_t smem = delta_rule_smem(dims);
  if (smem > 48 * 1024) {  // Qwen3.5's 128 x 128 heads: 66 KB, past the default
    CUDA_CHECK(cudaFuncSetAttribute(delta_rule_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  }
  const dim3 grid(num_seqs, dims.num_v_heads);
  delta_rule_kernel<<<grid, delta_rule_threads(dims), smem, stream>>>(d_core, d_conv_out, d_gates, dims, seqs, states);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void deltanet_gated_norm(T* d_out, const float* d_core, const T* d_proj, const float* d_weight,
                         const DeltaNetSizes& dims, int num_rows, float eps, cudaStream_t stream) {
  check_dims("deltanet_gated_norm", dims);
  if (num_rows == 0) return;
  const dim3 grid(num_rows, dims.num_v_heads);
  gated_norm_kernel<T><<<grid, kNormThreads, 0, stream>>>(d_out, d_core, d_proj, d_weight, dims, eps);
  CUDA_CHECK_LAUNCH();
}

void deltanet_decay_from_log(float* d_decay, int n, cudaStream_t stream) {
  if (n == 0) return;
  decay_from_log_kernel<<<(n + 255) / 256, 256, 0, stream>>>(d_decay, n);
  CUDA_CHECK_LAUNCH();
}

#define CBATCH_INSTANTIATE_DELTANET(T)                                                                           \
  template void deltanet_conv<T>(float*, const T*, const float*, const DeltaNetSizes&, const DeltaNetSeqs&, int,  \
                                 const DeltaNetStates&, cudaStream_t);                                         \
  template void deltanet_gates<T>(float*, float*, const T*, const float*, const float*, const DeltaNetSizes&, int, \
                                  cudaStream_t);                                                                 \
  template void deltanet_gated_norm<T>(T*, const float*, const T*, const float*, const DeltaNetSizes&, int, float, \
                                       cudaStream_t);
CBATCH_INSTANTIATE_DELTANET(float)
CBATCH_INSTANTIATE_DELTANET(__nv_bfloat16)
CBATCH_INSTANTIATE_DELTANET(__half)
#undef CBATCH_INSTANTIATE_DELTANET

}  // namespace cbatch
