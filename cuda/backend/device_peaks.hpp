// Measures the two ceilings of the roofline on this GPU, in this process: device-to-device copy
// bandwidth (bytes read + bytes written per second) and the throughput of a large GEMM in the
// compute dtype through the same cuBLAS path the model uses (or the FP8 GEMM's, with fp8 weights).
// Medians of timed repeats after warm-up.
#pragma once
#include <cuda_runtime.h>

#include <functional>

#include "cuda/common/cuda_context.hpp"
#include "engine/backend/roofline.hpp"

namespace cbatch {

// Median milliseconds of `repeats` runs of fn on the stream, timed with events after `warmup` runs;
// `before`, when given, is enqueued ahead of every run outside the timed span (to flush the L2, say).
double median_ms(cudaStream_t stream, int warmup, int repeats, const std::function<void()>& fn,
                 const std::function<void()>& before = nullptr);

template <typename T>
DevicePeaks measure_device_peaks(const CudaContext& context);

// FLOP/s of a large FP8 GEMM (E4M3 inputs, bf16 output) through the path --quantization fp8 uses: the
// compute ceiling of a backend with fp8 weights. Needs compute capability 8.9.
double measure_fp8_gemm_flops(const CudaContext& context);

}  // namespace cbatch
