// Upload of the LoRA pack in T and the per-product shrink + expand (lora_weights.hpp).
#include "cuda/lora/lora_weights.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/common/host_dtype.hpp"
#include "cuda/lora/lora.hpp"

namespace cbatch {
namespace {

template <typename U>
DeviceBuffer<U> upload(const std::vector<U>& host) {
  DeviceBuffer<U> d(host.size());
  if (!host.empty()) CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

void check_cuda_lora(const std::vector<LoraAdapter>& adapters, const ModelConfig& config, bool fp8_weights) {
  if (adapters.empty()) return;
  if (fp8_weights) {
    throw Error("--lora-modules with --quantization fp8: LoRA adapters on FP8 weights are not supported on CUDA "
                "(drop --quantization fp8, or use --device cpu)");
  }
  for (const LoraAdapter& a : adapters) {
    for (const LoraPair& p : a.pairs) {
      const bool ffn = p.product == LoraProduct::kGateUp || p.product == LoraProduct::kDown;
      if (ffn && config.is_sparse(p.layer)) {
        throw Error("LoRA adapter '" + a.name + "' (" + a.path + "): '" + p.module + "' of layer " +
                    std::to_string(p.layer) + " targets a mixture-of-experts layer, whose experts the CUDA backend "
                    "does not adapt (target the attention projections only, or use --device cpu)");
      }
    }
  }
}

template <typename T>
LoraWeights<T>::LoraWeights(const std::vector<LoraAdapter>& adapters, int num_layers, int max_rows) {
  const LoraPack pack = pack_lora_adapters(adapters, num_layers);
  num_adapters_ = pack.num_adapters;
  max_rank_total_ = pack.max_rank_total;
  std::vector<T> values(pack.values.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = from_f32<T>(pack.values[i]);
  arena_ = upload(values);
  slots_ = upload(lora_slots<T>(pack, arena_.get()));
  used_.assign(static_cast<size_t>(num_layers) * kNumLoraProducts, false);
  for (int layer = 0; layer < num_layers; ++layer) {
    for (int p = 0; p < kNumLoraProducts; ++p) {
      for (int a = 1; a <= num_adapters_; ++a) {
        if (pack.slots[pack.slot_index(layer, static_cast<LoraProduct>(p), a)].num_parts > 0) {
          used_[static_cast<size_t>(layer) * kNumLoraProducts + p] = true;
        }
      }
    }
  }
  if (max_rank_total_ > 0) shrunk_ = DeviceBuffer<float>(static_cast<size_t>(max_rows) * max_rank_total_);
}

template <typename T>
void LoraWeights<T>::add(LoraProduct product, int layer, const LoraTile* d_tiles, int num_tiles, const T* d_x,
                         int64_t x_stride, T* d_y, int64_t y_stride, int width, cudaStream_t stream) {
  if (num_tiles == 0 || used_.empty() || !used_[static_cast<size_t>(layer) * kNumLoraProducts + static_cast<int>(product)]) return;
  const LoraDeviceSlot<T>* slots =
      slots_.get() + (static_cast<size_t>(layer) * kNumLoraProducts + static_cast<size_t>(product)) *
                         static_cast<size_t>(num_adapters_ + 1);
  lora_shrink<T>(shrunk_.get(), max_rank_total_, d_x, x_stride, slots, d_tiles, num_tiles, stream);
  lora_expand<T>(d_y, y_stride, width, shrunk_.get(), max_rank_total_, slots, d_tiles, num_tiles, stream);
}

template class LoraWeights<float>;
template class LoraWeights<__nv_bfloat16>;
template class LoraWeights<__half>;

}  // namespace cbatch
