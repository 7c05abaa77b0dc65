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

CpuLoraSet::CpuLoraSet(const std::vector<LoraAdapter>& adapters, int num_layers, ThreadPool& pool)
    : serial_(std::make_unique<ThreadPool>(1)) {
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
  struct Task {
    size_t group;
    const CpuLoraPair* pair;
  };
  std::vector<Task> tasks;
  double cost_ns = 0;  // one core: ~0.1 ns a multiply-add, ~0.2 ns a weight streamed
  if (x_rows_.size() < groups.size()) x_rows_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& list = pairs_[static_cast<size_t>(groups[g].adapter - 1)][static_cast<size_t>(layer) * kNumLoraProducts +
                                                                          static_cast<int>(product)];
    if (list.empty()) continue;
    const int64_t m = static_cast<int64_t>(groups[g].rows.size());
    const int64_t in = list.front().a.cols();
    std::vector<float>& rows = x_rows_[g];
    rows.resize(static_cast<size_t>(m * in));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + groups[g].rows[i] * x_stride, in, &rows[static_cast<size_t>(i * in)]);
    for (const CpuLoraPair& p : list) {
      tasks.push_back({g, &p});
      const double weights = static_cast<double>(p.a.rows() * p.a.cols() + p.b.rows() * p.b.cols());
      cost_ns += weights * (0.1 * static_cast<double>(m) + 0.2);
    }
  }
  // Tasks write disjoint parts of y: another group's rows, or another pair's row range.
  const int64_t num_tasks = static_cast<int64_t>(tasks.size());
  pool.parallel_for(num_tasks, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> shrunk, out;  // (m, rank), (m, rows)
    for (int64_t t = begin; t < end; ++t) {
      const LoraGroup& g = groups[tasks[t].group];
      const CpuLoraPair& p = *tasks[t].pair;
      const int64_t m = static_cast<int64_t>(g.rows.size()), rows = p.b.rows();
      shrunk.resize(static_cast<size_t>(m * p.a.rows()));
      out.resize(static_cast<size_t>(m * rows));
      matmul(x_rows_[tasks[t].group].data(), p.a, shrunk.data(), m, *serial_);
      matmul(shrunk.data(), p.b, out.data(), m, *serial_);
      for (int64_t i = 0; i < m; ++i) {
        float* dst = y + g.rows[i] * y_stride + p.row_offset;
        const float* src = &out[static_cast<size_t>(i * rows)];
        for (int64_t j = 0; j < rows; ++j) dst[j] += src[j];
      }
    }
  }, 1, cost_ns < kMinParallelNs ? num_tasks + 1 : 2);
}

}  // namespace cbatch
