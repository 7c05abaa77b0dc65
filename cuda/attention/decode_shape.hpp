// The sizes every decode attention kernel is built around (decode_attention.hpp), apart from its launcher so
// that the kernels' block code (decode_cuda_cores_block.cuh, decode_mma_block.cuh) can include them: the
// most q heads a CTA serves for one kv head, and the keys a CUDA-core CTA takes per iteration.
#pragma once

namespace cbatch {

constexpr int kDecodeMaxGroup = 8;        // query heads per kv head
constexpr int kDecodeKeysPerChunk = 128;  // keys per CTA iteration (one per thread)

}  // namespace cbatch
