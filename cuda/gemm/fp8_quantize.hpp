// Per-tensor FP8 E4M3 quantization on the device (fp8_quantize.cu), vLLM's dynamic per-tensor scheme: the
// scale is amax / 448 (1 for an all-zero tensor) and each element is x / scale rounded to nearest even,
// saturating at +-448 (engine/model/fp8.hpp's rounding, bit-exact with CUDA's satfinite conversion);
// x ~ code * scale. The scale is written on the device, so quantizing activations needs no host sync.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace cbatch {

// Floats of scratch the partial maxima of fp8_quantize and fp8_amax need.
inline constexpr int kFp8PartialFloats = 1024;

// q (n) E4M3 codes and *d_scale (1 float) from x (n) T in {float, bf16, fp16}: two kernels, the per-block
// maxima into d_partials (kFp8PartialFloats), then the scale and the codes. n == 0 writes scale 1.
template <typename T>
void fp8_quantize(uint8_t* d_q, float* d_scale, const T* d_x, size_t n, float* d_partials, cudaStream_t stream);

// The largest |x[i]| of x (n) T, +infinity when x holds a NaN or an infinity; 0 for n == 0. Synchronizes
// the stream (a load-time check).
template <typename T>
float fp8_amax(const T* d_x, size_t n, float* d_partials, cudaStream_t stream);

}  // namespace cbatch
