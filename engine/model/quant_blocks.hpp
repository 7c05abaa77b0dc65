// Decoding of the GGUF block types beyond Q8_0/Q4_0/Q4_1: the K-quants (Q2_K..Q6_K, super-blocks of 256
// with 6- or 8-bit sub-block scales), Q5_0/Q5_1 (32, a fifth bit per element) and the non-linear IQ4_NL
// (32) and IQ4_XS (256). Each block decodes to exactly the float32 values of the `gguf` Python package's
// dequantize (products and differences rounded one at a time, never fused: this file is built without
// floating-point contraction, see CMakeLists.txt).
#pragma once
#include <cstdint>

#include "engine/model/tensor.hpp"

namespace cbatch {

// Decodes one block of `dtype` (a type listed above) into out (dtype_block_elems(dtype) floats).
void dequantize_quant_block(DType dtype, const uint8_t* block, float* out);

}  // namespace cbatch
