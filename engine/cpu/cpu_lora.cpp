#include "engine/cpu/cpu_lora.hpp"

#include <algorithm>

#include "engine/base/thread_pool.hpp"

namespace cbatch {

std::vector<LoraGroup> group_lora_rows(const std::vector<int32_t>& row_adapter) {
  std::vector<LoraGroup> groups;
  for (size_t r = 0; r < row_adapter.size(); ++r) {
    const int32_t id = row_adapter[r];
    if (id == 0) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [id](const LoraGroup& g) { return g.adapter == id; });
    if (it == groups.end()) it = groups.insert(groups.end(), LoraGroup{id, {}});
    it->rows.push_back(static_cast<int32_t>(r));
  }
  return groups;
}

CpuLoraSet::CpuLoraSet(const std::vector<LoraAdapter>& adapters, int num_layers, ThreadPool& pool) {
  for (const LoraAdapter& adapter : adapters) {
    std::vector<std::vector<CpuLoraPair>> layers(static_cast<size_t>(num_layers) * kNumLoraProducts);
    for (const LoraPair& p : adapter.pairs) {
      CpuLoraPair packed;
      packed.a = PackedMatrix(p.rank, p.in_features, [&](int64_t row, int64_t count, float* out) {
        std::copy_n(&p.a[static_cast<size_t>(row * p.in_features)], count * p.in_features, out);
      }, pool);
      packed.b = PackedMatrix(p.rows, p.rank, [&](int64_t row, int64_t count, float* out) {
        for (int64_t i = 0; i < count * p.rank; ++i) out[i] = p.scale * p.b[static_cast<size_t>(row * p.rank + i)];
      }, pool);
      packed.row_offset = p.row_offset;
      layers[static_cast<size_t>(p.layer) * kNumLoraProducts + static_cast<int>(p.product)].push_back(std::move(packed));
    }
    pairs_.push_back(std::move(layers));
  }
}

void CpuLoraSet::add(LoraProduct product, int layer, const std::vector<LoraGroup>& groups, const float* x,
                     int64_t x_stride, float* y, int64_t y_stride, ThreadPool& pool) {
  for (const LoraGroup& g : groups) {
    const auto& list = pairs_[static_cast<size_t>(g.adapter - 1)][static_cast<size_t>(layer) * kNumLoraProducts +
                                                                   static_cast<int>(product)];
    if (list.empty()) continue;
    const int64_t m = static_cast<int64_t>(g.rows.size());
    const int64_t in = list.front().a.cols();
    x_rows_.resize(static_cast<size_t>(m * in));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + g.rows[i] * x_stride, in, &x_rows_[static_cast<size_t>(i * in)]);
    for (const CpuLoraPair& p : list) {
      const int64_t rank = p.a.rows(), rows = p.b.rows();
      shrunk_.resize(static_cast<size_t>(m * rank));
      out_.resize(static_cast<size_t>(m * rows));
      matmul(x_rows_.data(), p.a, shrunk_.data(), m, pool);
      matmul(shrunk_.data(), p.b, out_.data(), m, pool);
      for (int64_t i = 0; i < m; ++i) {
        float* dst = y + g.rows[i] * y_stride + p.row_offset;
        const float* src = &out_[static_cast<size_t>(i * rows)];
        for (int64_t j = 0; j < rows; ++j) dst[j] += src[j];
      }
    }
  }
}

}  // namespace cbatch
