// Host launchers that materialize weights on the device (weight_convert.cu): random dummy weights
// generated in place (values, or MXFP4 blocks), fp32 rows converted to the compute dtype after upload, and
// GGUF blocks decoded after upload.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/model/tensor.hpp"

namespace cbatch {

// out[i] = T(random_element(seed, scale, offset, i)) for i < n: bit-identical to the host generator
// (engine/model/random_weights.hpp) in fp32, and its round-to-nearest-even in bf16/fp16. out (n) T.
template <typename T>
void fill_random(T* d_out, size_t n, uint64_t seed, float scale, float offset, cudaStream_t stream);

// Blocks [first_block, first_block + num_blocks) of a random MXFP4 tensor with this seed and scale, as
// random_mxfp4_block writes them on the host (engine/model/random_weights.hpp). out (num_blocks * 17) bytes.
void fill_random_mxfp4(uint8_t* d_out, size_t num_blocks, uint64_t seed, float scale, uint64_t first_block,
                       cudaStream_t stream);

// out[i] = T(in[i]) for i < n, round to nearest even. in (n) fp32, out (n) T.
template <typename T>
void convert_f32(T* d_out, const float* d_in, size_t n, cudaStream_t stream);

// out[i] = T(element i of num_blocks consecutive blocks of `dtype`, a GGUF block type), decoded by the
// element formulas of engine/model/quant_blocks.hpp: in fp32 the bits of tensor_rows_to_f32, in bf16/fp16
// their round-to-nearest-even. blocks (num_blocks * dtype_block_bytes(dtype) bytes), out (num_blocks *
// dtype_block_elems(dtype)) T.
template <typename T>
void decode_blocks(T* d_out, const uint8_t* d_blocks, DType dtype, size_t num_blocks, cudaStream_t stream);

}  // namespace cbatch
