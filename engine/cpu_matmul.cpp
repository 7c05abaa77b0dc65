#include "engine/cpu_matmul.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "engine/thread_pool.hpp"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace cbatch {
namespace {

// Vec: lane-wise accumulators. Three builds of the same arithmetic: AVX-512 (16 lanes), AVX2+FMA
// (8 lanes), portable (8 lanes of fmaf). One binary uses one of them for every call.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
struct Vec {
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  void fma(Vec a, Vec b) { v = _mm512_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
};
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
struct Vec {
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  void fma(Vec a, Vec b) { v = _mm256_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
};
#else
constexpr int kLanes = 8;
struct Vec {
  float v[8];
  static Vec zero() { return {}; }
  static Vec load(const float* p) {
    Vec r;
    for (int i = 0; i < 8; ++i) r.v[i] = p[i];
    return r;
  }
  void fma(Vec a, Vec b) {
    for (int i = 0; i < 8; ++i) v[i] = std::fma(a.v[i], b.v[i], v[i]);
  }
  void store(float* p) const {
    for (int i = 0; i < 8; ++i) p[i] = v[i];
  }
};
#endif

// The fixed final reduction of one element: lanes summed pairwise, then the k tail in order.
inline float finish_dot(const Vec& acc, const float* x, const float* w, int64_t k_vec, int64_t k) {
  float lanes[kLanes];
  acc.store(lanes);
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  }
  float tail = 0.0f;
  for (int64_t i = k_vec; i < k; ++i) tail = std::fma(x[i], w[i], tail);
  return lanes[0] + tail;
}

// An MR x NR tile of Y: MR rows of X against NR rows of W, all accumulators in registers.
template <int MR, int NR>
void tile(const float* x, const float* w, float* y, int64_t ldy, int64_t k) {
  const int64_t k_vec = k - k % kLanes;
  Vec acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = Vec::zero();
  for (int64_t p = 0; p < k_vec; p += kLanes) {
    Vec wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = Vec::load(w + j * k + p);
    for (int i = 0; i < MR; ++i) {
      const Vec xv = Vec::load(x + i * k + p);
      for (int j = 0; j < NR; ++j) acc[i][j].fma(xv, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = finish_dot(acc[i][j], x + i * k, w + j * k, k_vec, k);
}

constexpr int kMR = 4;
constexpr int kNR = 4;
using TileFn = void (*)(const float*, const float*, float*, int64_t, int64_t);

template <int MR, int... NRs>
constexpr std::array<TileFn, kNR> tile_row(std::integer_sequence<int, NRs...>) {
  return {&tile<MR, NRs + 1>...};
}

template <int... MRs>
constexpr std::array<std::array<TileFn, kNR>, kMR> tile_table(std::integer_sequence<int, MRs...>) {
  return {tile_row<MRs + 1>(std::make_integer_sequence<int, kNR>{})...};
}

// kTiles[mr - 1][nr - 1] computes an mr x nr tile (edges use the smaller ones).
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kMR>{});

// Columns [n_begin, n_end) of Y for all M rows, in column blocks that keep W's rows in cache.
void matmul_columns(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                    int64_t n_begin, int64_t n_end) {
  const int64_t block = std::max<int64_t>(kNR, (256 * 1024 / 4 / std::max<int64_t>(k, 1)) / kNR * kNR);
  for (int64_t nb = n_begin; nb < n_end; nb += block) {
    const int64_t nb_end = std::min(n_end, nb + block);
    for (int64_t i = 0; i < m; i += kMR) {
      const int mr = static_cast<int>(std::min<int64_t>(kMR, m - i));
      for (int64_t j = nb; j < nb_end; j += kNR) {
        const int nr = static_cast<int>(std::min<int64_t>(kNR, nb_end - j));
        kTiles[mr - 1][nr - 1](x + i * k, w + j * k, y + i * n + j, n, k);
      }
    }
  }
}

}  // namespace

void matmul(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k, ThreadPool& pool) {
  const int64_t flops = m * n * k;
  pool.parallel_for(n, [&](int64_t begin, int64_t end) { matmul_columns(x, w, y, m, n, k, begin, end); },
                    /*align=*/kNR, /*min_parallel=*/flops < (1 << 16) ? n + 1 : 2 * kNR);
}

void matmul_ref(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) tile<1, 1>(x + i * k, w + j * k, y + i * n + j, n, k);
}

}  // namespace cbatch
