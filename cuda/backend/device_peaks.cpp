#include "cuda/backend/device_peaks.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cuda/backend/weight_convert.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/gemm/fp8_gemm.hpp"
#include "cuda/gemm/fp8_quantize.hpp"
#include "cuda/gemm/gemm.hpp"

namespace cbatch {

double median_ms(cudaStream_t stream, int warmup, int repeats, const std::function<void()>& fn,
                 const std::function<void()>& before) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before();
    fn();
  }
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    if (before) before();
    CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}

template <typename T>
DevicePeaks measure_device_peaks(const CudaContext& context) {
  context.make_current();
  const cudaStream_t stream = context.stream();
  DevicePeaks peaks;
  {
    const size_t bytes = size_t{1} << 30;  // 1 GiB each way: far beyond L2
    DeviceBuffer<uint8_t> src(bytes), dst(bytes);
    CUDA_CHECK(cudaMemsetAsync(src.get(), 1, bytes, stream));
    const double ms = median_ms(stream, 2, 10, [&] {
      CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
    });
    peaks.bytes_per_s = 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
  }
  {
    const int n = 8192;  // random (not zero) operands: zeros run faster than real data
    const size_t elems = static_cast<size_t>(n) * n;
    DeviceBuffer<T> a(elems), b(elems), c(elems);
    fill_random<T>(a.get(), elems, 11, 0.05f, 0.0f, stream);
    fill_random<T>(b.get(), elems, 12, 0.05f, 0.0f, stream);
    const double ms = median_ms(stream, 2, 10, [&] {
      gemm<T, T>(context.cublas(), stream, c.get(), a.get(), b.get(), n, n, n);
    });
    peaks.flops_per_s = 2.0 * n * static_cast<double>(n) * n / (ms * 1e-3);
  }
  return peaks;
}

double measure_fp8_gemm_flops(const CudaContext& context) {
  context.make_current();
  const cudaStream_t stream = context.stream();
  const int n = 8192;
  const size_t elems = static_cast<size_t>(n) * n;
  DeviceBuffer<uint8_t> a(elems), b(elems);
  DeviceBuffer<float> scales(2), partials(kFp8PartialFloats);
  DeviceBuffer<__nv_bfloat16> c(elems);  // random values first, quantized into a and b; then the output
  fill_random<__nv_bfloat16>(c.get(), elems, 13, 0.05f, 0.0f, stream);
  fp8_quantize<__nv_bfloat16>(a.get(), scales.get(), c.get(), elems, partials.get(), stream);
  fill_random<__nv_bfloat16>(c.get(), elems, 14, 0.05f, 0.0f, stream);
  fp8_quantize<__nv_bfloat16>(b.get(), scales.get() + 1, c.get(), elems, partials.get(), stream);
  Fp8Gemm fp8(context.cublas_workspace(), context.cublas_workspace_bytes());
  const double ms = median_ms(stream, 2, 10, [&] {
    fp8.run<__nv_bfloat16>(c.get(), a.get(), scales.get(), b.get(), scales.get() + 1, n, n, n, stream);
  });
  return 2.0 * n * static_cast<double>(n) * n / (ms * 1e-3);
}

template DevicePeaks measure_device_peaks<float>(const CudaContext&);
template DevicePeaks measure_device_peaks<__nv_bfloat16>(const CudaContext&);
template DevicePeaks measure_device_peaks<__half>(const CudaContext&);

}  // namespace cbatch
