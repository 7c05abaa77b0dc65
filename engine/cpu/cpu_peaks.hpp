// The CPU's ceilings for bench's roofline (engine/backend/roofline.hpp), measured on the backend's
// threads: memory copy bandwidth (bytes read + written per second, over buffers far beyond the caches,
// each thread copying its own share) and the fp32 rate of the backend's own matmul on a large square
// product (what its kernels reach on an ideal shape; the work of a real step is measured against it).
#pragma once
#include "engine/backend/roofline.hpp"

namespace cbatch {

class ThreadPool;

DevicePeaks measure_cpu_peaks(ThreadPool& pool);

}  // namespace cbatch
