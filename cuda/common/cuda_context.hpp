// The CUDA context object of one backend: device, stream, cuBLAS handle and cuBLAS workspace. Every
// kernel and GEMM of the backend runs on this one stream; nothing here is global.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "cuda/common/cublas_library.hpp"
#include "cuda/common/device_buffer.hpp"

namespace cbatch {

class CudaContext {
 public:
  // Selects the device and creates the stream and cuBLAS handle (opening cuBLAS the first time). Throws
  // cbatch::Error.
  explicit CudaContext(int device_index);

  int device() const { return device_; }
  const cudaDeviceProp& properties() const { return properties_; }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  // The cuBLAS handle's workspace, which the FP8 GEMM (cuBLASLt) shares: both run on stream().
  void* cublas_workspace() const { return cublas_workspace_.get(); }
  size_t cublas_workspace_bytes() const { return cublas_workspace_.bytes(); }
  // Makes this context's device current on the calling thread (cheap; call at every entry point).
  void make_current() const;
  void synchronize() const;

 private:
  struct StreamDeleter {
    void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
  };
  struct CublasDeleter {
    void operator()(cublasHandle_t handle) const { cublas_library().destroy(handle); }
  };

  int device_ = 0;
  cudaDeviceProp properties_{};
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter> stream_;
  DeviceBuffer<uint8_t> cublas_workspace_;  // (32 MiB) given to cuBLAS; declared first, freed after the handle
  std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDeleter> cublas_;
};

}  // namespace cbatch
