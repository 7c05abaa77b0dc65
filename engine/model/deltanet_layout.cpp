// Qwen3-Next's DeltaNet projections grouped by key head, as runs of rows in the standard order
// (deltanet_layout.hpp). A key head's group holds its own q and k rows and the rows of the value heads that
// read it (num_v_heads / num_k_heads of them, consecutive in the standard order since value head j reads key
// head j / (num_v_heads / num_k_heads) when the heads are not tiled, as they are not in Qwen3-Next's files).
#include "engine/model/deltanet_layout.hpp"

#include <algorithm>

namespace cbatch {

std::vector<RowRun> grouped_qkvz_runs(const DeltaNetSizes& d) {
  const int64_t dk = d.k_head_dim, rv = int64_t{d.num_v_heads} / d.num_k_heads * d.v_head_dim;
  const int64_t key_dim = d.key_dim(), conv_dim = d.conv_dim();
  std::vector<RowRun> runs;
  for (int64_t kh = 0; kh < d.num_k_heads; ++kh) {
    const int64_t group = kh * (2 * dk + 2 * rv);
    runs.push_back({kh * dk, group, dk});                           // q
    runs.push_back({key_dim + kh * dk, group + dk, dk});            // k
    runs.push_back({2 * key_dim + kh * rv, group + 2 * dk, rv});    // v
    runs.push_back({conv_dim + kh * rv, group + 2 * dk + rv, rv});  // z
  }
  return runs;
}

std::vector<RowRun> grouped_ba_runs(const DeltaNetSizes& d) {
  const int64_t r = d.num_v_heads / d.num_k_heads;
  std::vector<RowRun> runs;
  for (int64_t kh = 0; kh < d.num_k_heads; ++kh) {
    runs.push_back({kh * r, kh * 2 * r, r});                      // b
    runs.push_back({d.num_v_heads + kh * r, kh * 2 * r + r, r});  // a
  }
  return runs;
}

std::vector<int32_t> value_head_sources(const DeltaNetSizes& d, bool from_tiled, bool to_tiled) {
  const int nk = d.num_k_heads, r = d.num_v_heads / d.num_k_heads;
  std::vector<int32_t> sources(static_cast<size_t>(d.num_v_heads));
  for (int h = 0; h < d.num_v_heads; ++h) {
    int source = h;
    if (to_tiled && !from_tiled) source = (h % nk) * r + h / nk;    // tiled h = j * nk + kh <- kh * r + j
    if (!to_tiled && from_tiled) source = (h % r) * nk + h / r;     // grouped h = kh * r + j <- j * nk + kh
    sources[static_cast<size_t>(h)] = static_cast<int32_t>(source);
  }
  return sources;
}

std::vector<int32_t> standard_order(const std::vector<RowRun>& runs, int64_t width) {
  std::vector<int32_t> order(static_cast<size_t>(width));
  for (const RowRun& run : runs) {
    for (int64_t t = 0; t < run.count; ++t) order[static_cast<size_t>(run.first + t)] = static_cast<int32_t>(run.source + t);
  }
  return order;
}

void reorder_values(float* values, int64_t rows, const std::vector<int32_t>& order) {
  const size_t width = order.size();
  std::vector<float> row(width);
  for (int64_t r = 0; r < rows; ++r) {
    float* v = values + static_cast<size_t>(r) * width;
    for (size_t i = 0; i < width; ++i) row[i] = v[order[i]];
    std::copy(row.begin(), row.end(), v);
  }
}

void copy_row_runs(const std::vector<RowRun>& runs, int64_t row_bytes,
                   const std::function<void(int64_t dst_offset, int64_t src_offset, int64_t bytes)>& copy) {
  for (const RowRun& run : runs) copy(run.first * row_bytes, run.source * row_bytes, run.count * row_bytes);
}

}  // namespace cbatch
