// Helpers of the CUDA kernel tests: host <-> device copies with conversion to and from the element type,
// NaN poisoning (so an output element a kernel forgot to write fails the comparison), random inputs, and
// the relative error ||out - ref|| / ||ref|| with per-type tolerances.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/host_dtype.hpp"

namespace cbatch::test {

using cbatch::from_f32;
using cbatch::to_f32;

// Relative tolerance of a kernel output in T: fp32 math is checked tightly, 16-bit outputs carry one
// rounding of about 2^-9 (bf16) or 2^-12 (fp16), plus tensor-core accumulation in cuBLAS GEMMs.
template <typename T>
double tolerance() {
  if constexpr (std::is_same_v<T, float>) {
    return 1e-5;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return 1e-2;
  } else {
    return 5e-3;
  }
}

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) {
    return "fp32";
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return "bf16";
  } else {
    return "fp16";
  }
}

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The values T can hold: inputs rounded once, so references see exactly what the kernel sees.
template <typename T>
std::vector<float> round_to(std::vector<float> v) {
  for (float& x : v) x = to_f32(from_f32<T>(x));
  return v;
}

// v's values as T, element by element through float (the emulated kernels' host inputs).
template <typename T, typename S>
std::vector<T> to_t(const std::vector<S>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = from_f32<T>(static_cast<float>(v[i]));
  return out;
}

// v's values as float (the emulated kernels' host outputs).
template <typename T>
std::vector<float> to_float_vector(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_f32(v[i]);
  return out;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<float>& host) {
  std::vector<T> converted(host.size());
  for (size_t i = 0; i < host.size(); ++i) converted[i] = from_f32<T>(host[i]);
  DeviceBuffer<T> d(host.size());
  if (!host.empty()) CUDA_CHECK(cudaMemcpy(d.get(), converted.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

inline DeviceBuffer<int32_t> to_device_i32(const std::vector<int32_t>& host) {
  DeviceBuffer<int32_t> d(host.size());
  if (!host.empty()) CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<float> to_host(const T* d, size_t n) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> raw(n);
  if (n > 0) CUDA_CHECK(cudaMemcpy(raw.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = to_f32(raw[i]);
  return out;
}

template <typename T>
std::vector<float> to_host(const DeviceBuffer<T>& d) {
  return to_host(d.get(), d.size());
}

// All bytes 0xFF: NaN in fp32, bf16 and fp16 alike.
template <typename T>
void poison(DeviceBuffer<T>& d) {
  if (d.bytes() > 0) CUDA_CHECK(cudaMemset(d.get(), 0xFF, d.bytes()));
}

// ||out - ref|| / ||ref||; infinity when out holds a NaN or infinity or the sizes differ.
inline double rel_error(const std::vector<float>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

}  // namespace cbatch::test
