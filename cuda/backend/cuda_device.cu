// Device discovery for --version and --device auto.
#include <cuda_runtime.h>

#include "cuda/backend/cuda_device.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

namespace {

cudaDeviceProp device_properties(int device_index) {
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, device_index);
  if (err != cudaSuccess) {
    throw Error("cudaGetDeviceProperties(" + std::to_string(device_index) +
                ") failed: " + cudaGetErrorString(err));
  }
  return prop;
}

}  // namespace

int cuda_compute_capability(int device_index) {
  const cudaDeviceProp prop = device_properties(device_index);
  return prop.major * 10 + prop.minor;
}

std::string cuda_device_description(int device_index) {
  const cudaDeviceProp prop = device_properties(device_index);
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
}

}  // namespace cbatch
