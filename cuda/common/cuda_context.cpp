// CudaContext: stream, cuBLAS handle (default math mode: no TF32 for fp32 GEMMs) and cuBLAS workspace.
#include "cuda/common/cuda_context.hpp"

#include <string>

#include "cuda/common/cuda_check.hpp"

namespace cbatch {

constexpr size_t kCublasWorkspaceBytes = 32u << 20;  // what cuBLAS recommends for Hopper

CudaContext::CudaContext(int device_index) : device_(device_index) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  if (device_index < 0 || device_index >= count) {
    throw Error("CUDA device " + std::to_string(device_index) + " does not exist (" + std::to_string(count) +
                " device(s) found)");
  }
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaGetDeviceProperties(&properties_, device_));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_.reset(stream);
  const CublasLibrary& cublas = cublas_library();
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublas.create(&handle));
  cublas_.reset(handle);
  CUBLAS_CHECK(cublas.set_stream(handle, stream));
  CUBLAS_CHECK(cublas.set_math_mode(handle, CUBLAS_DEFAULT_MATH));
  cublas_workspace_ = DeviceBuffer<uint8_t>(kCublasWorkspaceBytes);
  CUBLAS_CHECK(cublas.set_workspace(handle, cublas_workspace_.get(), cublas_workspace_.bytes()));
}

void CudaContext::make_current() const { CUDA_CHECK(cudaSetDevice(device_)); }

void CudaContext::synchronize() const { CUDA_CHECK(cudaStreamSynchronize(stream_.get())); }

}  // namespace cbatch
