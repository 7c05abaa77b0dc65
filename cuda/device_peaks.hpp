// Measures the two ceilings of the roofline on this GPU, in this process: device-to-device copy
// bandwidth (bytes read + bytes written per second) and the throughput of a large GEMM in the
// compute dtype through the same cuBLAS path the model uses. Medians of timed repeats after warm-up.
#pragma once
#include "cuda/cuda_context.hpp"
#include "engine/roofline.hpp"

namespace cbatch {

template <typename T>
DevicePeaks measure_device_peaks(const CudaContext& context);

}  // namespace cbatch
