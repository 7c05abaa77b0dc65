#include "engine/cpu_matmul.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/error.hpp"
#include "engine/thread_pool.hpp"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace cbatch {
namespace {

// Vec: one panel row of lanes. Three builds of the same arithmetic (a lane-wise fused multiply-add):
// AVX-512 (16 lanes), AVX2+FMA (8), portable fmaf (8). One binary uses one of them for every call.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kMR = 8;   // rows per register tile
constexpr int kNV = 3;   // panels per register tile: 24 accumulators of 32
struct Vec {
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec broadcast(float x) { return {_mm512_set1_ps(x)}; }
  void fma(Vec a, Vec b) { v = _mm512_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
};
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
constexpr int kMR = 4;
constexpr int kNV = 3;   // 12 accumulators of 16
struct Vec {
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec broadcast(float x) { return {_mm256_set1_ps(x)}; }
  void fma(Vec a, Vec b) { v = _mm256_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
};
#else
constexpr int kLanes = 8;
constexpr int kMR = 4;
constexpr int kNV = 2;
struct Vec {
  float v[8];
  static Vec zero() { return {}; }
  static Vec load(const float* p) {
    Vec r;
    for (int i = 0; i < 8; ++i) r.v[i] = p[i];
    return r;
  }
  static Vec broadcast(float x) {
    Vec r;
    for (float& e : r.v) e = x;
    return r;
  }
  void fma(Vec a, Vec b) {
    for (int i = 0; i < 8; ++i) v[i] = std::fma(a.v[i], b.v[i], v[i]);
  }
  void store(float* p) const { std::memcpy(p, v, sizeof(v)); }
};
#endif

constexpr int64_t kRowBlock = 128;  // rows of X kept in cache while the panels stream past

// An MR x NV-panel tile of Y. panels: the first panel of the tile, panel stride k * kLanes. Columns of
// the tile past `cols` (the end of N) are computed on the zero padding and not stored.
template <int MR, int NV>
void tile(const float* x, int64_t ldx, const float* panels, int64_t k, float* y, int64_t ldy, int64_t cols) {
  Vec acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec::zero();
  for (int64_t p = 0; p < k; ++p) {
    Vec w[NV];
    for (int v = 0; v < NV; ++v) w[v] = Vec::load(panels + v * k * kLanes + p * kLanes);
    for (int r = 0; r < MR; ++r) {
      const Vec xb = Vec::broadcast(x[r * ldx + p]);
      for (int v = 0; v < NV; ++v) acc[r][v].fma(xb, w[v]);
    }
  }
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

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);

template <int MR, int... NVs>
constexpr std::array<TileFn, kNV> tile_row(std::integer_sequence<int, NVs...>) {
  return {&tile<MR, NVs + 1>...};
}

template <int... MRs>
constexpr std::array<std::array<TileFn, kNV>, kMR> tile_table(std::integer_sequence<int, MRs...>) {
  return {tile_row<MRs + 1>(std::make_integer_sequence<int, kNV>{})...};
}

// kTiles[mr - 1][nv - 1] computes an mr-row, nv-panel tile (edges use the smaller ones).
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kMR>{});

int64_t num_panels(int64_t n) { return (n + kLanes - 1) / kLanes; }

// Panels [panel_begin, panel_end) of Y for all M rows.
void matmul_panels(const float* x, const PackedMatrix& w, float* y, int64_t m, int64_t panel_begin,
                   int64_t panel_end) {
  const int64_t n = w.rows(), k = w.cols();
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t i_end = std::min(m, i0 + kRowBlock);
    for (int64_t p = panel_begin; p < panel_end; p += kNV) {
      const int nv = static_cast<int>(std::min<int64_t>(kNV, panel_end - p));
      const float* panels = w.data() + p * k * kLanes;
      for (int64_t i = i0; i < i_end; i += kMR) {
        const int mr = static_cast<int>(std::min<int64_t>(kMR, i_end - i));
        kTiles[mr - 1][nv - 1](x + i * k, k, panels, k, y + i * n + p * kLanes, n, n - p * kLanes);
      }
    }
  }
}

}  // namespace

int matmul_panel_width() { return kLanes; }

void PackedMatrix::FreeDeleter::operator()(float* p) const { std::free(p); }

PackedMatrix::PackedMatrix(int64_t n, int64_t k, const RowFiller& fill, ThreadPool& pool) : n_(n), k_(k) {
  const int64_t panels = num_panels(n);
  const size_t count = static_cast<size_t>(std::max<int64_t>(1, panels * k * kLanes));
  data_.reset(static_cast<float*>(std::malloc(count * sizeof(float))));
  if (!data_) throw Error("cannot allocate " + std::to_string(count * sizeof(float)) + " bytes of weights");
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) {
    std::vector<float> rows(static_cast<size_t>(kLanes * k));  // (kLanes, K) rows of one panel
    for (int64_t p = begin; p < end; ++p) {
      const int64_t valid = std::min<int64_t>(kLanes, n - p * kLanes);
      fill(p * kLanes, valid, rows.data());
      std::fill(rows.begin() + valid * k, rows.end(), 0.0f);
      float* panel = data_.get() + p * k * kLanes;
      for (int64_t c = 0; c < k; ++c)
        for (int l = 0; l < kLanes; ++l) panel[c * kLanes + l] = rows[static_cast<size_t>(l * k + c)];
    }
  });
}

void matmul(const float* x, const PackedMatrix& w, float* y, int64_t m, ThreadPool& pool) {
  const int64_t panels = num_panels(w.rows());
  // One-core cost of a panel: m x kLanes x K vector multiply-adds (~0.01 ns each) and kLanes x K weights
  // streamed from memory (~0.2 ns each, all of the cost when m is small).
  const double panel_ns = (0.01 * static_cast<double>(m) + 0.2) * kLanes * static_cast<double>(w.cols());
  pool.parallel_for(panels, [&](int64_t begin, int64_t end) { matmul_panels(x, w, y, m, begin, end); },
                    /*align=*/kNV, /*min_parallel=*/std::max<int64_t>(2 * kNV, min_parallel_items(panel_ns)));
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
