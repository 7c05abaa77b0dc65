// The CUDA backend's paged KV cache (cuda_forward.hpp): how many blocks fit the GPU's memory, their
// allocation (with the batch index buffers, whose size depends on the block size), and the copy-on-write of
// blocks that samples shared.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "cuda/backend/cuda_forward.hpp"
#include "cuda/common/cuda_check.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

// (num_layers, 2) FP8 cache scales of 1.0 on the device (kv_cache_dtype.hpp).
DeviceBuffer<float> unit_kv_scales(int num_layers) {
  const std::vector<float> ones(2 * static_cast<size_t>(std::max(num_layers, 1)), 1.0f);
  DeviceBuffer<float> scales(ones.size());
  CUDA_CHECK(cudaMemcpy(scales.get(), ones.data(), scales.bytes(), cudaMemcpyHostToDevice));
  return scales;
}

int cache_slot_values(const ModelConfig& config, const KvGroups& groups) {
  int unit = 1;  // the least common multiple of the attention layers' head sizes
  for (int l = 0; l < config.num_layers; ++l) {
    if (config.is_attention(l)) unit = std::lcm(unit, config.head_dim_of(l));
  }
  return (groups.slot_values + unit - 1) / unit * unit;
}

template <typename T>
int64_t CudaBackend<T>::max_kv_blocks(int block_size) const {
  if (block_size <= 0) throw Error("block size must be positive, got " + std::to_string(block_size));
  context_.make_current();
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double budget = static_cast<double>(total_bytes) * options_.gpu_memory_utilization;
  // Weights, workspace, the linear layers' scratch (a blocks weight decoded for a many-row product, FP8 input
  // codes) and the CUDA context; a cache this backend already holds is replaced, so it and its batch index
  // buffer count as free.
  const double own_cache = static_cast<double>(kv_cache_.bytes() + uploader_.device_bytes() + recurrent_.slots.bytes());
  const double in_use = static_cast<double>(total_bytes - free_bytes) - own_cache;
  const double index_bytes = static_cast<double>(BatchUploader::capacity(limits(block_size, 0)) * sizeof(int32_t));
  const double state_bytes = static_cast<double>(max_state_slots() * state_slot_bytes());  // reserved first
  const double available = budget - in_use - index_bytes - state_bytes;
  const int64_t block_bytes = kv_block_bytes(block_size);
  const int64_t blocks = available > 0 ? static_cast<int64_t>(available / static_cast<double>(block_bytes)) : 0;
  const int64_t needed = kv_groups_.pages_for_tokens(max_context(), block_size, options_.max_batch_tokens);
  if (blocks <= 0 || blocks < needed) {
    throw Error("not enough GPU memory for the KV cache: " + gib_string(static_cast<double>(total_bytes)) + " x " +
                std::to_string(options_.gpu_memory_utilization) + " = " + gib_string(budget) + " allowed, " +
                gib_string(in_use) + " already in use (weights " + gib_string(static_cast<double>(weights_.bytes())) +
                ", workspace " + gib_string(static_cast<double>(workspace_.device_bytes() + moe_.device_bytes() +
                                                      recurrent_.device_bytes())) +
                ", linear scratch " + gib_string(static_cast<double>(linear_.device_bytes())) + "), leaving " +
                gib_string(std::max(available, 0.0)) + " for " + std::to_string(blocks) + " blocks; one sequence of " +
                std::to_string(max_context()) + " tokens needs " + std::to_string(needed) + " blocks of " +
                std::to_string(block_bytes) + " bytes. Raise --gpu-memory-utilization, lower --max-num-batched-tokens "
                "or --max-num-seqs, or use a smaller dtype or model");
  }
  return blocks;
}

template <typename T>
void CudaBackend<T>::allocate_kv_cache(const KvCacheSpec& spec) {
  if (spec.num_blocks <= 0 || spec.block_size <= 0) {
    throw Error("KV cache needs positive num_blocks and block_size, got " + std::to_string(spec.num_blocks) + " and " +
                std::to_string(spec.block_size));
  }
  context_.make_current();
  const int state_slots = spec.num_state_slots + spec.num_state_snapshots;  // running, then the snapshots
  if (state_slots > max_state_slots()) {
    throw Error("CUDA backend: " + std::to_string(state_slots) + " state slots asked for (" +
                std::to_string(spec.num_state_snapshots) + " of them snapshots), " + std::to_string(max_state_slots()) +
                " reserved");
  }
  kv_cache_ = DeviceBuffer<uint8_t>();  // free the old cache before asking for the new one
  recurrent_.slots = DeviceBuffer<float>();
  recurrent_.num_slots = 0;
  uploader_ = BatchUploader();
  shape_.block_size = 0;          // "no cache" until every allocation below has succeeded
  shape_.num_blocks = 0;
  const size_t layer_elems = static_cast<size_t>(spec.num_blocks) * spec.block_size * slot_values_;
  DeviceBuffer<uint8_t> cache(2 * static_cast<size_t>(kv_groups_.layers_per_page) * layer_elems * kv_elem_bytes());
  BatchUploader uploader(limits(spec.block_size, spec.num_blocks));
  // Never read before written (attention only loads positions 0..max position of its rows); zeroed so
  // a stray read would give finite values and runs stay deterministic.
  if (cache.bytes() > 0) CUDA_CHECK(cudaMemsetAsync(cache.get(), 0, cache.bytes(), context_.stream()));
  DeviceBuffer<float> states(static_cast<size_t>(state_slots) * recurrent_.slot_floats());
  if (states.bytes() > 0) CUDA_CHECK(cudaMemsetAsync(states.get(), 0, states.bytes(), context_.stream()));
  kv_cache_ = std::move(cache);
  uploader_ = std::move(uploader);
  recurrent_.slots = std::move(states);
  recurrent_.num_slots = state_slots;
  shape_.block_size = spec.block_size;
  shape_.num_blocks = spec.num_blocks;
  context_.synchronize();
}

// Copy-on-write of blocks that n > 1 samples shared: every cache slot's K and V of each source block (one KV
// group's page) into its destination, on the step's stream before anything writes (a block of one slot's K or
// V is contiguous, slot_values_ a token whatever the layer's shape). The layers of any one group name each
// slot once.
template <typename T>
void CudaBackend<T>::copy_blocks(const RaggedBatch& batch, cudaStream_t stream) {
  const size_t block_bytes = static_cast<size_t>(shape_.block_size) * slot_values_ * kv_elem_bytes();
  for (int c = 0; c < batch.num_block_copies(); ++c) {
    const int32_t src = batch.block_copies[2 * c], dst = batch.block_copies[2 * c + 1];
    if (src < 0 || dst < 0 || src >= shape_.num_blocks || dst >= shape_.num_blocks) {
      throw Error("CUDA backend: block copy " + std::to_string(src) + " -> " + std::to_string(dst) +
                  " outside the KV cache");
    }
    for (int layer : kv_groups_.groups.front().layers) {
      for (uint8_t* cache : {k_cache<uint8_t>(layer), v_cache<uint8_t>(layer)}) {  // bytes, whatever the element
        CUDA_CHECK(cudaMemcpyAsync(cache + dst * block_bytes, cache + src * block_bytes, block_bytes,
                                   cudaMemcpyDeviceToDevice, stream));
      }
    }
  }
}

#define CBATCH_INSTANTIATE_KV_CACHE(T)                                                                        \
  template int64_t CudaBackend<T>::max_kv_blocks(int) const;                                                  \
  template void CudaBackend<T>::allocate_kv_cache(const KvCacheSpec&);                                        \
  template void CudaBackend<T>::copy_blocks(const RaggedBatch&, cudaStream_t);
CBATCH_INSTANTIATE_KV_CACHE(float)
CBATCH_INSTANTIATE_KV_CACHE(__nv_bfloat16)
CBATCH_INSTANTIATE_KV_CACHE(__half)
#undef CBATCH_INSTANTIATE_KV_CACHE

}  // namespace cbatch
