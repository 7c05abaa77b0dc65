// Weight upload: each host tensor is converted to fp32 in chunks of at most 64 MiB (tensor_rows_to_f32
// handles every stored dtype), copied through one pinned buffer and narrowed to T on the device; random
// tensors are generated on the device. Fused matrices are written part by part at row offsets.
#include "cuda/device_weights.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/weight_convert.hpp"

namespace cbatch {
namespace {

constexpr int64_t kChunkFloats = int64_t{16} << 20;  // 64 MiB of fp32

std::string shape_string(int64_t rows, int64_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

void expect_shape(const TensorView& t, int64_t rows, int64_t cols) {
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
    if (t.is_random) {
      fill_random<T>(dst, numel, t.random.seed, t.random.scale, t.random.offset, stream_);
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

  void finish() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_;
  PinnedBuffer<float> host_;    // (kChunkFloats)
  DeviceBuffer<float> device_;  // (kChunkFloats)
};

template <typename T>
LayerWeights<T> upload_layer(WeightUploader& up, const LayerTensors& t, const ModelConfig& c) {
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  LayerWeights<T> w;
  w.attn_norm = up.upload<float>(t.attn_norm, 1, dim);
  w.wqkv = DeviceBuffer<T>(static_cast<size_t>((q_dim + 2 * kv_dim) * dim));
  up.upload(t.wq, q_dim, dim, w.wqkv.get());
  up.upload(t.wk, kv_dim, dim, w.wqkv.get() + static_cast<size_t>(q_dim * dim));
  up.upload(t.wv, kv_dim, dim, w.wqkv.get() + static_cast<size_t>((q_dim + kv_dim) * dim));
  w.wo = up.upload<T>(t.wo, dim, q_dim);
  w.ffn_norm = up.upload<float>(t.ffn_norm, 1, dim);
  w.w_gate_up = DeviceBuffer<T>(static_cast<size_t>(2 * hidden * dim));
  up.upload(t.w_gate, hidden, dim, w.w_gate_up.get());
  up.upload(t.w_up, hidden, dim, w.w_gate_up.get() + static_cast<size_t>(hidden * dim));
  w.w_down = up.upload<T>(t.w_down, dim, hidden);
  return w;
}

}  // namespace

template <typename T>
size_t DeviceWeights<T>::bytes() const {
  size_t total = embedding.bytes() + final_norm.bytes() + untied_lm_head.bytes() + rope_inv_freq.bytes();
  for (const LayerWeights<T>& w : layers) {
    total += w.attn_norm.bytes() + w.wqkv.bytes() + w.wo.bytes() + w.ffn_norm.bytes() + w.w_gate_up.bytes() +
             w.w_down.bytes();
  }
  return total;
}

template <typename T>
DeviceWeights<T> upload_weights(const Model& model, cudaStream_t stream) {
  const ModelConfig& c = model.config;
  const ModelTensors& t = model.tensors;
  if (static_cast<int>(t.layers.size()) != c.num_layers) {
    throw Error("model has " + std::to_string(t.layers.size()) + " layers of tensors, config says " +
                std::to_string(c.num_layers));
  }
  WeightUploader up(stream);
  DeviceWeights<T> w;
  w.embedding = up.upload<T>(t.embedding, c.vocab_size, c.dim);
  for (const LayerTensors& layer : t.layers) w.layers.push_back(upload_layer<T>(up, layer, c));
  w.final_norm = up.upload<float>(t.final_norm, 1, c.dim);
  if (!c.tied_embeddings) w.untied_lm_head = up.upload<T>(t.lm_head, c.vocab_size, c.dim);

  std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
  rope_inv_freq(c, inv_freq.data());
  w.rope_inv_freq = DeviceBuffer<float>(inv_freq.size());
  CUDA_CHECK(cudaMemcpyAsync(w.rope_inv_freq.get(), inv_freq.data(), inv_freq.size() * sizeof(float),
                             cudaMemcpyHostToDevice, stream));
  up.finish();  // also keeps inv_freq alive until its copy is done
  return w;
}

template struct DeviceWeights<float>;
template struct DeviceWeights<__nv_bfloat16>;
template struct DeviceWeights<__half>;
template DeviceWeights<float> upload_weights<float>(const Model&, cudaStream_t);
template DeviceWeights<__nv_bfloat16> upload_weights<__nv_bfloat16>(const Model&, cudaStream_t);
template DeviceWeights<__half> upload_weights<__half>(const Model&, cudaStream_t);

}  // namespace cbatch
