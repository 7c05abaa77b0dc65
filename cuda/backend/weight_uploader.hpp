// The weight upload's transfers (device_weights.cpp): a host tensor, checked against its expected shape, to the
// device in chunks of whole rows of at most 64 MiB through one pinned buffer: GGUF blocks copied as stored and
// decoded to T on the device (decode_blocks), or copied as they are (raw blocks kept so), other tensors converted
// to fp32 on the host (tensor_rows_to_f32) and narrowed to T on the device; random tensors generated on the
// device; vectors fp32 with the family's norm offset added on the host.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "cuda/backend/weight_convert.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {

inline constexpr int64_t kChunkFloats = int64_t{16} << 20;  // 64 MiB of fp32

inline std::string shape_string(int64_t rows, int64_t cols) {
  std::string shape = "(";  // appended, not "(" + ...: GCC 12's -Wrestrict misfires on that once inlined
  shape += std::to_string(rows);
  shape += ", ";
  shape += std::to_string(cols);
  shape += ")";
  return shape;
}

inline void expect_shape(const TensorView& t, int64_t rows, int64_t cols) {
  if (t.empty()) throw Error("tensor '" + t.name + "' is missing");
  const bool ok = (t.rows == rows && t.cols == cols) || (rows == 1 && t.numel() == cols);  // norms: any (1, dim) view
  if (!ok) {
    throw Error("tensor '" + t.name + "' has shape " + shape_string(t.rows, t.cols) + ", expected " +
                shape_string(rows, cols));
  }
}

class WeightUploader {
 public:
  explicit WeightUploader(cudaStream_t stream) : stream_(stream), host_(kChunkFloats), device_(kChunkFloats) {}

  // Writes tensor t, checked to be (rows, cols), to dst (rows, cols) in T.
  template <typename T>
  void upload(const TensorView& t, int64_t rows, int64_t cols, T* dst) {
    expect_shape(t, rows, cols);
    const size_t numel = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    if (t.is_random && t.dtype == DType::kMXFP4) {
      upload_random_blocks(t, dst);
      return;
    }
    if (t.is_random) {
      fill_random<T>(dst, numel, t.random.seed, t.random.scale, t.random.offset, stream_);
      return;
    }
    // Blocks are decoded on the device as stored; a tensor whose columns are its inputs permuted
    // (input_order: a pre-quantized act-order weight) goes the fp32 way, which puts them back in order.
    if (is_block_type(t.dtype) && t.input_order == nullptr) {
      upload_blocks(t, dst);
      return;
    }
    // Walk the tensor's own rows: a norm stored as (dim, 1) has the same flat layout as (1, dim).
    if (t.cols > kChunkFloats) throw Error("tensor '" + t.name + "' has rows too long to upload");
    const int64_t chunk_rows = kChunkFloats / t.cols;
    for (int64_t r0 = 0; r0 < t.rows; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, t.rows - r0);
      const size_t count = static_cast<size_t>(n * t.cols);
      CUDA_CHECK(cudaStreamSynchronize(stream_));  // the previous chunk's copy is done with host_
      tensor_rows_to_f32(t, r0, n, host_.get());
      CUDA_CHECK(cudaMemcpyAsync(device_.get(), host_.get(), count * sizeof(float), cudaMemcpyHostToDevice, stream_));
      convert_f32<T>(dst + static_cast<size_t>(r0 * t.cols), device_.get(), count, stream_);
    }
  }

  template <typename T>
  DeviceBuffer<T> upload(const TensorView& t, int64_t rows, int64_t cols) {
    DeviceBuffer<T> buffer(static_cast<size_t>(rows) * static_cast<size_t>(cols));
    upload(t, rows, cols, buffer.get());
    return buffer;
  }

  // Vector t of n floats (checked to be (1, n)), plus offset, at dst: fp32 on the device.
  void upload_vector(const TensorView& t, int64_t n, float offset, float* dst) {
    expect_shape(t, 1, n);
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // the previous chunk's copy is done with host_
    tensor_rows_to_f32(t, 0, t.rows, host_.get());  // all n values, stored as (1, n) or (n, 1)
    for (int64_t i = 0; i < n; ++i) host_.get()[i] += offset;
    CUDA_CHECK(cudaMemcpyAsync(dst, host_.get(), static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice,
                               stream_));
  }

  // A vector (n) on the device: a norm weight with the family's offset added, or a bias (offset 0).
  DeviceBuffer<float> upload_norm(const TensorView& t, int64_t n, float offset) {
    DeviceBuffer<float> buffer(static_cast<size_t>(n));
    upload_vector(t, n, offset, buffer.get());
    return buffer;
  }

  // Tensor t in GGUF blocks, checked to be (rows, cols), copied to dst as its bytes (rows of row_bytes).
  void upload_raw_blocks(const TensorView& t, int64_t rows, int64_t cols, uint8_t* dst) {
    expect_shape(t, rows, cols);
    if (t.input_order != nullptr) throw Error("internal error: tensor '" + t.name + "' has permuted inputs");
    if (t.is_random) {  // a dummy MXFP4 tensor: its blocks generated in place
      fill_random_mxfp4(dst, static_cast<size_t>(rows * cols / 32), t.random.seed, t.random.scale, 0, stream_);
      return;
    }
    const int64_t row = row_bytes(t.dtype, t.cols), chunk_bytes = kChunkFloats * int64_t{sizeof(float)};
    if (row > chunk_bytes) throw Error("tensor '" + t.name + "' has rows too long to upload");
    const int64_t chunk_rows = chunk_bytes / row;
    auto* host = reinterpret_cast<uint8_t*>(host_.get());
    for (int64_t r0 = 0; r0 < t.rows; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, t.rows - r0);
      CUDA_CHECK(cudaStreamSynchronize(stream_));  // the previous chunk's copy is done with host_
      std::memcpy(host, static_cast<const uint8_t*>(t.data) + r0 * row, static_cast<size_t>(n * row));
      CUDA_CHECK(cudaMemcpyAsync(dst + r0 * row, host, static_cast<size_t>(n * row), cudaMemcpyHostToDevice, stream_));
    }
  }

  void finish() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  cudaStream_t stream() const { return stream_; }

 private:
  // Tensor t stored in GGUF blocks, (t.rows, t.cols), to dst in T: its bytes copied as they are, whole
  // rows at a time, and decoded on the device.
  template <typename T>
  void upload_blocks(const TensorView& t, T* dst) {
    const int64_t row = row_bytes(t.dtype, t.cols), chunk_bytes = kChunkFloats * int64_t{sizeof(float)};
    if (row > chunk_bytes) throw Error("tensor '" + t.name + "' has rows too long to upload");
    const int64_t chunk_rows = chunk_bytes / row, blocks_per_row = t.cols / dtype_block_elems(t.dtype);
    auto* host = reinterpret_cast<uint8_t*>(host_.get());
    auto* device = reinterpret_cast<uint8_t*>(device_.get());
    for (int64_t r0 = 0; r0 < t.rows; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, t.rows - r0);
      CUDA_CHECK(cudaStreamSynchronize(stream_));  // the previous chunk's copy and decode are done
      std::memcpy(host, static_cast<const uint8_t*>(t.data) + r0 * row, static_cast<size_t>(n * row));
      CUDA_CHECK(cudaMemcpyAsync(device, host, static_cast<size_t>(n * row), cudaMemcpyHostToDevice, stream_));
      decode_blocks<T>(dst + static_cast<size_t>(r0 * t.cols), device, t.dtype, static_cast<size_t>(n * blocks_per_row),
                       stream_);
    }
  }

  // A random MXFP4 tensor (t.rows, t.cols) to dst in T: its blocks generated on the device a chunk at a
  // time and decoded as uploaded blocks are.
  template <typename T>
  void upload_random_blocks(const TensorView& t, T* dst) {
    constexpr int64_t kBlockBytes = BlockFormat<DType::kMXFP4>::kBytes;
    const int64_t chunk_blocks = kChunkFloats * int64_t{sizeof(float)} / kBlockBytes;
    const int64_t num_blocks = t.numel() / 32;
    auto* device = reinterpret_cast<uint8_t*>(device_.get());
    for (int64_t b0 = 0; b0 < num_blocks; b0 += chunk_blocks) {
      const int64_t n = std::min(chunk_blocks, num_blocks - b0);  // stream order: the last decode is done
      fill_random_mxfp4(device, static_cast<size_t>(n), t.random.seed, t.random.scale, static_cast<uint64_t>(b0),
                        stream_);
      decode_blocks<T>(dst + static_cast<size_t>(b0 * 32), device, DType::kMXFP4, static_cast<size_t>(n), stream_);
    }
  }

  cudaStream_t stream_;
  PinnedBuffer<float> host_;    // (kChunkFloats)
  DeviceBuffer<float> device_;  // (kChunkFloats)
};

}  // namespace cbatch
