// The cudaDataType_t of a compute element type, for the cuBLAS and cuBLASLt calls.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>

namespace cbatch {

template <typename T>
constexpr cudaDataType_t cuda_data_type();
template <>
constexpr cudaDataType_t cuda_data_type<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType_t cuda_data_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <>
constexpr cudaDataType_t cuda_data_type<__half>() { return CUDA_R_16F; }

}  // namespace cbatch
