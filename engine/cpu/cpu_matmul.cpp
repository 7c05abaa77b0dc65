#include "engine/cpu/cpu_matmul.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_matmul_blocks.hpp"
#include "engine/cpu/cpu_matmul_int8.hpp"
#include "engine/base/thread_pool.hpp"

namespace cbatch {
namespace {

using namespace matmul_detail;

constexpr int64_t kRowBlock = 128;  // rows of X kept in cache while the panels stream past

// Stores an MR x NV-panel tile of accumulators; columns past `cols` (the end of N) were computed on
// the zero padding and are not stored.
template <int MR, int NV>
void store_tile(const Vec (&acc)[MR][NV], float* y, int64_t ldy, int64_t cols) {
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      const int64_t valid = std::min<int64_t>(kLanes, cols - v * kLanes);
      if (valid == kLanes) {
        acc[r][v].store(y + r * ldy + v * kLanes);
      } else if (valid > 0) {
        float lanes[kLanes];
        acc[r][v].store(lanes);
        std::memcpy(y + r * ldy + v * kLanes, lanes, static_cast<size_t>(valid) * sizeof(float));
      }
    }
  }
}

// An MR x NV-panel tile of Y. panels: the first panel of the tile, panel stride k * kLanes.
template <int MR, int NV>
void tile(const float* x, int64_t ldx, const float* panels, int64_t k, float* y, int64_t ldy, int64_t cols) {
  Vec acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec::zero();
  for (int64_t p = 0; p < k; ++p) {
    Vec w[NV];
    for (int v = 0; v < NV; ++v) w[v] = Vec::load_to_register(panels + v * k * kLanes + p * kLanes);
    for (int r = 0; r < MR; ++r) {
      const Vec xb = Vec::broadcast(x[r * ldx + p]);
      for (int v = 0; v < NV; ++v) acc[r][v].fma(xb, w[v]);
    }
  }
  store_tile(acc, y, ldy, cols);
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);

template <int MR, int... NVs>
constexpr std::array<TileFn, sizeof...(NVs)> tile_row(std::integer_sequence<int, NVs...>) {
  return {&tile<MR, NVs + 1>...};
}

template <int... MRs>
constexpr std::array<std::array<TileFn, kNV>, kMR> tile_table(std::integer_sequence<int, MRs...>) {
  return {tile_row<MRs + 1>(std::make_integer_sequence<int, kNV>{})...};
}

// kTiles[mr - 1][nv - 1] computes an mr-row, nv-panel tile (edges use the smaller ones); kRowTiles[nv - 1]
// a one-row tile of up to kRowNV panels.
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kMR>{});
constexpr auto kRowTiles = tile_row<1>(std::make_integer_sequence<int, kRowNV>{});

int64_t num_panels(int64_t n) { return (n + kLanes - 1) / kLanes; }

// The tile of `tile` straight from blocked panels of format F (panel stride panel_bytes), decoding each
// weight as it is used: for a few rows this beats unpacking into a buffer and reading it back. Same
// values, same order of multiply-adds, so the same bits.
template <class F, int MR, int NV>
void tile_blocked(const float* x, int64_t ldx, const uint8_t* panels, size_t panel_bytes, int64_t k, float* y,
                  int64_t ldy, int64_t cols) {
  using L = GroupLayout<F>;
  Vec acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec::zero();
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    BlockedGroup<F> groups[NV];
    for (int v = 0; v < NV; ++v) groups[v] = BlockedGroup<F>(panels + v * panel_bytes + b * L::kBytes);
    for (int sub = 0; sub < L::kSubs; ++sub) {
      for (int v = 0; v < NV; ++v) groups[v].select(sub);
      for (int i = sub * L::kSubK; i < (sub + 1) * L::kSubK; ++i) {
        Vec w[NV];
        for (int v = 0; v < NV; ++v) w[v] = groups[v].weights(i);
        const int64_t p = b * kGroupK + i;
        for (int r = 0; r < MR; ++r) {
          const Vec xb = Vec::broadcast(x[r * ldx + p]);
          for (int v = 0; v < NV; ++v) acc[r][v].fma(xb, w[v]);
        }
      }
    }
  }
  store_tile(acc, y, ldy, cols);
}

using BlockedTileFn = void (*)(const float*, int64_t, const uint8_t*, size_t, int64_t, float*, int64_t, int64_t);

template <class F, int... NVs>
constexpr std::array<BlockedTileFn, kRowNV> blocked_tile_row(std::integer_sequence<int, NVs...>) {
  return {&tile_blocked<F, 1, NVs + 1>...};
}

template <int I>
constexpr std::array<BlockedTileFn, kRowNV> blocked_tiles_of() {
  constexpr DType kType = static_cast<DType>(I);
  if constexpr (is_block_type(kType)) {
    return blocked_tile_row<BlockFormat<kType>>(std::make_integer_sequence<int, kRowNV>{});
  } else {
    return {};
  }
}

template <int... Is>
constexpr auto blocked_tile_table(std::integer_sequence<int, Is...>) {
  return std::array<std::array<BlockedTileFn, kRowNV>, sizeof...(Is)>{blocked_tiles_of<Is>()...};
}

// kBlockedTiles[dtype][nv - 1]: a one-row tile straight from blocked panels of a block type (plain types:
// none).
constexpr int kNumDTypes = static_cast<int>(kLastDType) + 1;
constexpr auto kBlockedTiles = blocked_tile_table(std::make_integer_sequence<int, kNumDTypes>{});

// Panels [panel_begin, panel_end) of Y for all M rows. One row (a decode step of one sequence) runs the
// one-row tiles, kRowNV panels at a time, blocked weights decoded in registers as they are used. More
// rows unpack kNV blocked panels at a time into a per-thread buffer (once per kRowBlock rows, which the
// products then amortize) and run the fp32 tiles on it.
void matmul_panels(const float* x, const PackedMatrix& w, float* y, int64_t m, int64_t panel_begin,
                   int64_t panel_end) {
  const int64_t n = w.rows(), k = w.cols();
  if (m == 1) {
    for (int64_t p = panel_begin; p < panel_end; p += kRowNV) {
      const int nv = static_cast<int>(std::min<int64_t>(kRowNV, panel_end - p));
      if (w.is_blocked()) {
        kBlockedTiles[static_cast<int>(w.dtype())][nv - 1](x, k, w.blocked_panel(p), w.panel_bytes(), k,
                                                           y + p * kLanes, n, n - p * kLanes);
      } else {
        kRowTiles[nv - 1](x, k, w.data() + p * k * kLanes, k, y + p * kLanes, n, n - p * kLanes);
      }
    }
    return;
  }
  thread_local std::vector<float> unpacked;
  if (w.is_blocked() && unpacked.size() < static_cast<size_t>(kNV * k * kLanes)) unpacked.resize(kNV * k * kLanes);
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t i_end = std::min(m, i0 + kRowBlock);
    for (int64_t p = panel_begin; p < panel_end; p += kNV) {
      const int nv = static_cast<int>(std::min<int64_t>(kNV, panel_end - p));
      const float* panels = unpacked.data();
      if (w.is_blocked()) {
        w.unpack_panels(p, nv, unpacked.data());
      } else {
        panels = w.data() + p * k * kLanes;
      }
      for (int64_t i = i0; i < i_end; i += kMR) {
        const int mr = static_cast<int>(std::min<int64_t>(kMR, i_end - i));
        kTiles[mr - 1][nv - 1](x + i * k, k, panels, k, y + i * n + p * kLanes, n, n - p * kLanes);
      }
    }
  }
}

}  // namespace

namespace {

// Weights of a matrix: its whole 2 MB stretches in 2 MB pages where the kernel gives them on request
// (transparent huge pages in madvise mode; the tail stays in 4 KB pages, so nothing is added to the
// resident set), so that streaming a matrix does not walk the page tables every 4 KB.
void* alloc_weights(size_t bytes) {
#if defined(__linux__)
  constexpr size_t kHugePage = 2u << 20;
  if (bytes >= kHugePage) {
    void* p = nullptr;
    if (posix_memalign(&p, kHugePage, bytes) != 0) return nullptr;
    madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: where refused, 4 KB pages
    return p;
  }
#endif
  return std::malloc(bytes);
}

}  // namespace

int matmul_panel_width() { return kLanes; }

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

bool PackedMatrix::keeps_blocks(DType dtype, int64_t k) {
  // FP8 (E4M3 codes, not integers) has no int8 panels of its own: on the 8-bit path it becomes Q8_0's
  // (cpu_pack.cpp); its blocked panels serve the fp32 product.
  return is_block_type(dtype) && k > 0 && k % dtype_block_elems(dtype) == 0;
}

PackedMatrix::PackedMatrix(int64_t n, int64_t k, DType dtype, const BlockRows& row_blocks, ThreadPool& pool,
                           bool int8, bool planes)
    : dtype_(dtype), int8_(int8), planes_(int8 && planes && has_int8_planes(dtype)), n_(n), k_(k) {
  if (!keeps_blocks(dtype, k) || (int8 && dtype == DType::kFP8)) {
    throw Error("internal error: weights of this type cannot stay in these blocks");
  }
  const int64_t panels = num_panels(n);
  const size_t blocked_bytes = static_cast<size_t>(k / kGroupK) * blocked_group_bytes(dtype);
  panel_bytes_ = int8 ? static_cast<size_t>(k / kGroupK) * int8_group_bytes(dtype, planes_) : blocked_bytes;
  bytes_ = std::max<size_t>(1, static_cast<size_t>(panels) * panel_bytes_);
  data_.reset(alloc_weights(bytes_));
  if (!data_) throw Error("cannot allocate " + std::to_string(bytes_) + " bytes of weights");
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> blocked(int8 ? blocked_bytes : 0);  // int8: one blocked panel before its rewrite
    for (int64_t p = begin; p < end; ++p) {
      const uint8_t* rows[kLanes];
      for (int l = 0; l < kLanes; ++l) rows[l] = p * kLanes + l < n ? row_blocks(p * kLanes + l) : nullptr;
      uint8_t* panel = static_cast<uint8_t*>(data_.get()) + p * panel_bytes_;
      pack_blocked_panel(dtype, rows, k, int8 ? blocked.data() : panel);
      if (int8) pack_int8_panel(dtype, planes_, rows, blocked.data(), k, panel);
    }
  });
}

PackedMatrix::PackedMatrix(std::vector<PackedMatrix> parts)
    : dtype_(parts.front().dtype()), int8_(true), k_(parts.front().cols()) {
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].is_int8() || parts[i].cols() != k_ || (i + 1 < parts.size() && parts[i].rows() % kLanes != 0) ||
        q8_block(parts[i].dtype()) != q8_block(dtype_)) {
      throw Error("internal error: stacked int8 parts must share K and the activation block, and fill whole panels");
    }
    n_ += parts[i].rows();
    bytes_ += parts[i].bytes();
  }
  parts_ = std::move(parts);
}

void PackedMatrix::set_input_order(std::vector<int32_t> order) {
  if (!int8_ || !parts_.empty() || static_cast<int64_t>(order.size()) != k_) {
    throw Error("internal error: an input order belongs to one int8 matrix and has K entries");
  }
  bytes_ += order.size() * sizeof(int32_t);
  input_order_ = std::move(order);
}

void PackedMatrix::unpack_panels(int64_t panel, int count, float* out) const {
  if (int8_) throw Error("internal error: int8 panels have no fp32 form");
  for (int i = 0; i < count; ++i) {
    float* dst = out + i * k_ * kLanes;
    if (is_blocked()) {
      unpack_blocked_panel(dtype_, blocked_panel(panel + i), k_, dst);
    } else {
      std::memcpy(dst, data() + (panel + i) * k_ * kLanes, static_cast<size_t>(k_ * kLanes) * sizeof(float));
    }
  }
}

PackedMatrix::PackedMatrix(int64_t n, int64_t k, const RowFiller& fill, ThreadPool& pool) : n_(n), k_(k) {
  const int64_t panels = num_panels(n);
  const size_t count = static_cast<size_t>(std::max<int64_t>(1, panels * k * kLanes));
  bytes_ = count * sizeof(float);
  data_.reset(alloc_weights(bytes_));
  if (!data_) throw Error("cannot allocate " + std::to_string(bytes_) + " bytes of weights");
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) {
    std::vector<float> rows(static_cast<size_t>(kLanes * k));  // (kLanes, K) rows of one panel
    for (int64_t p = begin; p < end; ++p) {
      const int64_t valid = std::min<int64_t>(kLanes, n - p * kLanes);
      fill(p * kLanes, valid, rows.data());
      std::fill(rows.begin() + valid * k, rows.end(), 0.0f);
      float* panel = static_cast<float*>(data_.get()) + p * k * kLanes;
      for (int64_t c = 0; c < k; ++c)
        for (int l = 0; l < kLanes; ++l) panel[c * kLanes + l] = rows[static_cast<size_t>(l * k + c)];
    }
  });
}

namespace {

// The 8-bit product: X's rows quantized (each on its own), then panels split across the pool as above;
// a stacked matrix's panels are numbered across its parts, each part writing its own columns of Y (ldy).
void matmul_int8_rows(const float* x, const PackedMatrix& w, float* y, int64_t ldy, int64_t m, ThreadPool& pool) {
  thread_local Q8Rows buffer;  // grows to the largest batch, then reused
  Q8Rows& rows = buffer;       // the caller's: a worker naming `buffer` would get its own
  quantize_rows_q8(x, m, w.cols(), q8_block(w.dtype()), rows);
  const Int8Isa isa = int8_isa();
  // Panels [begin, end) of the whole, as far as they fall in the part whose first panel is `first`.
  auto run_part = [&](const PackedMatrix& part, int64_t first, int64_t begin, int64_t end) {
    const int64_t b = std::max(begin, first), e = std::min(end, first + num_panels(part.rows()));
    if (b >= e) return;
    matmul_int8_panels(isa, part.dtype(), part.has_planes(), rows, 0, m, part.blocked_panel(0), part.panel_bytes(),
                       b - first, e - first, y + first * kLanes, ldy, part.rows());
  };
  const double panel_ns = (0.003 * static_cast<double>(m) + 0.1) * kLanes * static_cast<double>(w.cols());
  pool.parallel_for(num_panels(w.rows()), [&](int64_t begin, int64_t end) {
    if (w.parts().empty()) return run_part(w, 0, begin, end);
    int64_t first = 0;
    for (const PackedMatrix& part : w.parts()) {
      run_part(part, first, begin, end);
      first += num_panels(part.rows());
    }
  }, /*align=*/kInt8TilePanels, /*min_parallel=*/std::max<int64_t>(2 * kInt8TilePanels, min_parallel_items(panel_ns)));
}

std::span<const PackedMatrix> parts_of(const PackedMatrix& w) {
  return w.parts().empty() ? std::span(&w, 1) : std::span(w.parts());
}

bool has_input_order(const PackedMatrix& w) {
  for (const PackedMatrix& part : parts_of(w)) {
    if (part.input_order() != nullptr) return true;
  }
  return false;
}

// With input orders, part by part: each part's activation rows gathered into its order (a copy, exact),
// then its own 8-bit product, so every output element is what the part alone computes.
void matmul_int8(const float* x, const PackedMatrix& w, float* y, int64_t m, ThreadPool& pool) {
  if (!has_input_order(w)) return matmul_int8_rows(x, w, y, w.rows(), m, pool);
  thread_local std::vector<float> gathered;  // (m, K)
  std::vector<float>& xs = gathered;
  const int64_t k = w.cols();
  int64_t first = 0;  // the part's first column of Y
  for (const PackedMatrix& part : parts_of(w)) {
    const std::vector<int32_t>* order = part.input_order();
    if (order != nullptr) {
      xs.resize(static_cast<size_t>(std::max<int64_t>(m * k, static_cast<int64_t>(xs.size()))));
      for (int64_t i = 0; i < m; ++i) {
        float* row = xs.data() + i * k;
        for (int64_t j = 0; j < k; ++j) row[j] = x[i * k + (*order)[static_cast<size_t>(j)]];
      }
    }
    matmul_int8_rows(order != nullptr ? xs.data() : x, part, y + first, w.rows(), m, pool);
    first += part.rows();
  }
}

}  // namespace

void matmul(const float* x, const PackedMatrix& w, float* y, int64_t m, ThreadPool& pool) {
  if (w.is_int8()) return matmul_int8(x, w, y, m, pool);
  const int64_t panels = num_panels(w.rows());
  // One-core cost of a panel: m x kLanes x K vector multiply-adds (~0.01 ns each) and kLanes x K weights
  // streamed from memory (~0.2 ns each, all of the cost when m is small).
  const double panel_ns = (0.01 * static_cast<double>(m) + 0.2) * kLanes * static_cast<double>(w.cols());
  const int64_t tile_panels = m == 1 ? kRowNV : kNV;  // chunks of whole tiles
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) { matmul_panels(x, w, y, m, begin, end); },
                    /*align=*/tile_panels,
                    /*min_parallel=*/std::max<int64_t>(2 * tile_panels, min_parallel_items(panel_ns)));
}

void matmul_on_thread(const float* x, const Q8Rows* xq, const PackedMatrix& w, float* y, int64_t m) {
  if (!w.is_int8()) return matmul_panels(x, w, y, m, 0, num_panels(w.rows()));
  if (has_input_order(w)) throw Error("internal error: a routed expert's matrix with an input order");
  const Int8Isa isa = int8_isa();
  const std::span<const PackedMatrix> parts = parts_of(w);
  int64_t first = 0;  // the part's first column of Y (every part but the last fills whole panels)
  for (const PackedMatrix& part : parts) {
    matmul_int8_panels(isa, part.dtype(), part.has_planes(), *xq, 0, m, part.blocked_panel(0), part.panel_bytes(), 0,
                       num_panels(part.rows()), y + first, w.rows(), part.rows());
    first += part.rows();
  }
}

void matmul_ref(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc = std::fma(x[i * k + p], w[j * k + p], acc);
      y[i * n + j] = acc;
    }
  }
}

}  // namespace cbatch
