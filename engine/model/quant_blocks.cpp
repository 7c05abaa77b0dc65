// Host decoding of GGUF blocks to fp32 through the element formulas of quant_blocks.hpp.
#include "engine/model/quant_blocks.hpp"

namespace cbatch {

void dequantize_blocks(DType dtype, const uint8_t* blocks, int64_t num_blocks, float* out) {
  with_block_format(dtype, [&](auto format) {
    using F = decltype(format);
    for (int64_t b = 0; b < num_blocks; ++b) decode_block<F>(blocks + b * F::kBytes, out + b * F::kElems);
  });
}

}  // namespace cbatch
