// attend_row's AVX-512 kernel (cpu_attention_avx512.hpp), compiled for AVX-512 with target attributes and
// chosen at run time. Scores: 16 positions of a block per register (K is stored by element, its block's
// positions side by side: k_cache_index), 8 accumulators per query head for score_positions' 8-lane
// chains, up to 3 query heads (of all the rows) sharing each K load; values: up to 4 q heads of one kv head
// at once, each V row loaded once for them, 64 output elements per head held in registers. attend_rows'
// rows of one sequence share each K load, and each 64-element pass over V. A bf16 cache is widened to fp32
// as it is read (exactly), so the arithmetic is the fp32 cache's.
#include "engine/cpu/cpu_attention_avx512.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/cpu/cpu_exp.hpp"
#include "engine/cpu/cpu_ops.hpp"

// GCC 12's false positive on the AVX-512 intrinsics' undefined pass-through operand (as in the int8 kernels).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace cbatch::attention_detail {

#if defined(__x86_64__)
namespace {

#define CBATCH_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

constexpr int kOutRegisters = 4;  // output registers per head in weighted_values: 64 elements

// attention_mul_add (cpu_attention_params.hpp) on 16 lanes: a * b + c, fused where the build's CPU has
// FMA, else the product (out of the compiler's sight, so that it is not contracted) then the add.
CBATCH_AVX512 inline __m512 mul_add(__m512 a, __m512 b, __m512 c) {
#if defined(CBATCH_ATTENTION_FMA)
  return _mm512_fmadd_ps(a, b, c);
#else
  __m512 p = _mm512_mul_ps(a, b);
  asm("" : "+v"(p));
  return _mm512_add_ps(p, c);
#endif
}

// 16 cache elements from p as fp32: floats, or bf16 widened exactly (its bits the upper half of an fp32's);
// load16 masked: the lanes outside mask are zero and not read.
CBATCH_AVX512 inline __m512 widen16(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
CBATCH_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
CBATCH_AVX512 inline __m512 load16(const uint16_t* p) {
  return widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
CBATCH_AVX512 inline __m512 load16(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }
CBATCH_AVX512 inline __m512 load16(const uint16_t* p, __mmask16 mask) {
  return widen16(_mm256_maskz_loadu_epi16(mask, p));
}

inline float capped(float score, float softcap) {
  return softcap > 0.0f ? softcap * std::tanh(score / softcap) : score;
}

// Scores of NC query heads (q[c], head_dim each) against the keys of one run of up to 16 positions of a
// block (lane l: the run's l-th position), out[c][l] = q[c] . k_l * scale for the lanes in mask; k: the kv
// head's first element of the run, element i of lane l at k + i * k_stride + l. Lane l of acc[c][j] is
// score_positions' acc[j][l] (cpu_ops.cpp), and the tree is its tree, so the bits are attend_head's
// (before its softcap, which the caller applies).
template <int NC, typename T>
CBATCH_AVX512 void score_run(const float* const* q, float* const* out, const T* k, int64_t k_stride,
                             __mmask16 mask, int head_dim, float scale) {
  __m512 acc[NC][8];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[c][j] = _mm512_setzero_ps();
  }
  for (int i = 0; i < head_dim; i += 8) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512 kv = load16(k + (i + j) * k_stride, mask);
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) acc[c][j] = mul_add(_mm512_set1_ps(q[c][i + j]), kv, acc[c][j]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) {
    const __m512 lo = _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][4]), _mm512_add_ps(acc[c][1], acc[c][5]));
    const __m512 hi = _mm512_add_ps(_mm512_add_ps(acc[c][2], acc[c][6]), _mm512_add_ps(acc[c][3], acc[c][7]));
    const __m512 dot = _mm512_add_ps(_mm512_add_ps(lo, hi), _mm512_setzero_ps());  // + the empty tail
    _mm512_mask_storeu_ps(out[c], mask, _mm512_mul_ps(dot, _mm512_set1_ps(scale)));
  }
}

// out[h * out_stride + i] for i < width of NH consecutive q heads reading one kv head: per element
// mul_add(weight, v, acc) over positions first..n - 1 in order, from zero. weights (NH, stride) by position;
// rows: each position's offset of its cache row, plus the kv head's (and the first element's).
template <int NH, int NZ, typename T>
CBATCH_AVX512 void weighted_values(const T* v_base, const int64_t* rows, int first, int n, const float* weights,
                                   int stride, int width, float* out, int out_stride) {
  for (int i0 = 0; i0 < width; i0 += 16 * NZ) {
    __m512 acc[NH][NZ];
    for (auto& head : acc)
      for (auto& a : head) a = _mm512_setzero_ps();
    for (int p = first; p < n; ++p) {
      const T* v = v_base + rows[p] + i0;
      __m512 vz[NZ];
      for (int z = 0; z < NZ; ++z) vz[z] = load16(v + 16 * z);
      for (int h = 0; h < NH; ++h) {
        const __m512 w = _mm512_set1_ps(weights[h * stride + p]);
        for (int z = 0; z < NZ; ++z) acc[h][z] = mul_add(w, vz[z], acc[h][z]);
      }
    }
    for (int h = 0; h < NH; ++h)
      for (int z = 0; z < NZ; ++z) _mm512_storeu_ps(out + h * out_stride + i0 + 16 * z, acc[h][z]);
  }
}

template <int NZ, typename T>
void weighted_values_of(int num, const T* v_base, const int64_t* rows, int first, int n, const float* weights,
                        int stride, int width, float* out, int out_stride) {
  switch (num) {
    case 1: return weighted_values<1, NZ, T>(v_base, rows, first, n, weights, stride, width, out, out_stride);
    case 2: return weighted_values<2, NZ, T>(v_base, rows, first, n, weights, stride, width, out, out_stride);
    case 3: return weighted_values<3, NZ, T>(v_base, rows, first, n, weights, stride, width, out, out_stride);
    default: return weighted_values<4, NZ, T>(v_base, rows, first, n, weights, stride, width, out, out_stride);
  }
}

// exp_weights (cpu_attention.hpp) 16 at a time: lane i of the accumulator is exp_weights' lane i.
static_assert(kExpWeightLanes == 16);
CBATCH_AVX512 float exp_weights16(float* s, int count, float max) {
  const __m512 m = _mm512_set1_ps(max);
  __m512 acc = _mm512_setzero_ps();
  int i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 e = exp_detail::exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), m));
    _mm512_storeu_ps(s + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < count) {
    const auto mask = static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m512 e = exp_detail::exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + i), m));
    _mm512_mask_storeu_ps(s + i, mask, e);
    acc = _mm512_mask_add_ps(acc, mask, acc, e);
  }
  acc = _mm512_add_ps(acc, _mm512_shuffle_f32x4(acc, acc, _MM_SHUFFLE(1, 0, 3, 2)));  // lane j += lane j + 8
  acc = _mm512_add_ps(acc, _mm512_shuffle_f32x4(acc, acc, _MM_SHUFFLE(2, 3, 0, 1)));  // j += j + 4
  acc = _mm512_add_ps(acc, _mm512_permute_ps(acc, _MM_SHUFFLE(1, 0, 3, 2)));          // j += j + 2
  acc = _mm512_add_ps(acc, _mm512_permute_ps(acc, _MM_SHUFFLE(2, 3, 0, 1)));          // j += j + 1
  return _mm512_cvtss_f32(acc);
}

// The rows attend_rows_avx512 computes: row t's query heads q + t * q_stride at position pos[t] (keys
// first[t]..pos[t]), its scores (num_heads, stride) at scores + t * scratch_stride, then its max and its
// sum (num_heads each); all of them read one sequence's cache through offsets (each position's cache row).
struct RowTile {
  const float* q;
  int64_t q_stride;
  const int* pos;
  const int* first;
  int count;
  float* scores;
  int64_t scratch_stride;
  int stride;  // positions a score row holds: the last row's pos + 1
  float* scores_of(int t) const { return scores + t * scratch_stride; }
  float* max_of(int t, int num_heads) const { return scores_of(t) + static_cast<int64_t>(num_heads) * stride; }
  float* sum_of(int t, int num_heads) const { return max_of(t, num_heads) + num_heads; }
};

// score_run of `count` (row, q head) pairs, three at a time (two and two for four): up to 24 accumulators.
template <typename T>
CBATCH_AVX512 void score_runs(const float* const* q, float* const* out, int count, const T* k, int64_t k_stride,
                              __mmask16 mask, int head_dim, float scale) {
  for (int c = 0; c < count;) {
    const int left = count - c;
    const int take = left == 4 ? 2 : std::min(3, left);
    if (take == 3) score_run<3, T>(q + c, out + c, k, k_stride, mask, head_dim, scale);
    if (take == 2) score_run<2, T>(q + c, out + c, k, k_stride, mask, head_dim, scale);
    if (take == 1) score_run<1, T>(q + c, out + c, k, k_stride, mask, head_dim, scale);
    c += take;
  }
}

// The largest of init and s[0..count - 1] (not NaN).
CBATCH_AVX512 float max_of(const float* s, int count, float init) {
  __m512 m = _mm512_set1_ps(init);
  int i = 0;
  for (; i + 16 <= count; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + i));
  if (i < count) {
    const auto mask = static_cast<__mmask16>((1u << (count - i)) - 1);
    m = _mm512_mask_max_ps(m, mask, m, _mm512_maskz_loadu_ps(mask, s + i));
  }
  return _mm512_reduce_max_ps(m);
}

// Every row's scores of every head, then each head's max: the keys of each run of up to 16 positions of a
// block are loaded once for all the (row, q head) pairs that see them, three at a time (bf16 widened as it is
// loaded: cheaper than widening a run into a buffer once, measured).
template <typename T>
CBATCH_AVX512 void score_rows(const RowTile& tile, const PagedKv& cache, const int32_t* block_table, int first, int n,
                              int num_heads, int group, const AttentionParams& params) {
  const T* k_cache = static_cast<const T*>(cache.k);
  const int hd = params.head_dim, bs = cache.block_size;
  const int num_kv_heads = num_heads / group;
  thread_local std::vector<const float*> q;  // the pairs that see a run: their q heads and score rows
  thread_local std::vector<float*> out;
  q.resize(static_cast<size_t>(tile.count * group));
  out.resize(q.size());
  for (int p = first; p < n;) {
    const int offset = p % bs;
    const int count = std::min({16, bs - offset, n - p});
    const auto mask = static_cast<__mmask16>((1u << count) - 1);
    const int64_t block_start = static_cast<int64_t>(block_table[p / bs]) * bs;
    for (int g = 0; g < num_kv_heads; ++g) {
      int pairs = 0;
      for (int t = 0; t < tile.count; ++t) {
        if (p + count <= tile.first[t] || p > tile.pos[t]) continue;  // lanes outside a row's keys: never read
        for (int h = g * group; h < (g + 1) * group; ++h) {
          q[pairs] = tile.q + t * tile.q_stride + h * hd;
          out[pairs++] = tile.scores_of(t) + static_cast<int64_t>(h) * tile.stride + p;
        }
      }
      if (pairs == 0) continue;
      const T* k = k_cache + k_cache_index(block_start + offset, g * hd, cache.kv_dim, bs);
      score_runs(q.data(), out.data(), pairs, k, bs, mask, hd, params.scale);
    }
    p += count;
  }
  for (int t = 0; t < tile.count; ++t) {
    for (int h = 0; h < num_heads; ++h) {
      float* s = tile.scores_of(t) + static_cast<int64_t>(h) * tile.stride;
      const int from = tile.first[t], to = tile.pos[t];
      if (params.softcap > 0.0f) {
        for (int i = from; i <= to; ++i) s[i] = capped(s[i], params.softcap);
      }
      tile.max_of(t, num_heads)[h] = max_of(s + from, to + 1 - from, params.sink(h));
    }
  }
}

}  // namespace

bool can_attend_row_avx512(int head_dim) {
  static const bool has_avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }();
  return has_avx512 && head_dim > 0 && head_dim % kHeadDimMultiple == 0;
}

namespace {

template <typename T>
void attend_rows_of(const float* q, int64_t q_stride, const PagedKv& cache, const int32_t* block_table,
                    const int* pos, int count, int num_heads, int num_kv_heads, const AttentionParams& params,
                    float* scratch, float* out, int64_t out_stride) {
  const int hd = params.head_dim;
  const int group = num_heads / num_kv_heads;
  int first_key[kMaxAttendRows];
  int first = pos[0], n = 0;  // the keys any row sees: first..n - 1
  for (int t = 0; t < count; ++t) {
    first_key[t] = params.first_key(pos[t]);
    first = std::min(first, first_key[t]);
    n = std::max(n, pos[t] + 1);
  }
  const RowTile tile{q, q_stride, pos, first_key, count, scratch, attend_row_scratch(num_heads, n - 1), n};
  thread_local std::vector<int64_t> rows;  // (n) each position's cache row offset
  rows.resize(static_cast<size_t>(n));
  for (int p = first; p < n; ++p) {
    rows[p] = (static_cast<int64_t>(block_table[p / cache.block_size]) * cache.block_size + p % cache.block_size) *
              cache.kv_dim;
  }
  score_rows<T>(tile, cache, block_table, first, n, num_heads, group, params);
  for (int t = 0; t < count; ++t) {
    float* max_score = tile.max_of(t, num_heads);
    float* sum = tile.sum_of(t, num_heads);
    for (int h = 0; h < num_heads; ++h) {
      float* s = tile.scores_of(t) + static_cast<int64_t>(h) * n;
      // attend_head's sum; the sink adds 0 without one
      sum[h] = exp_weights16(s + first_key[t], pos[t] + 1 - first_key[t], max_score[h]) +
               exp_fp32(params.sink(h) - max_score[h]);
      for (int p = first_key[t]; p <= pos[t]; ++p) s[p] = s[p] / sum[h];
    }
  }
  // 64 output elements of up to 4 heads at a time, row after row: the V rows of those elements stay in
  // cache for the next row.
  constexpr int kWidth = 16 * kOutRegisters;
  for (int kv = 0; kv < num_kv_heads; ++kv) {
    for (int h = kv * group; h < (kv + 1) * group; h += 4) {
      const int num = std::min(4, (kv + 1) * group - h);
      for (int i0 = 0; i0 < hd; i0 += kWidth) {
        const T* v_base = static_cast<const T*>(cache.v) + static_cast<int64_t>(kv) * hd + i0;
        for (int t = 0; t < count; ++t) {
          const float* weights = tile.scores_of(t) + static_cast<int64_t>(h) * n;
          weighted_values_of<kOutRegisters>(num, v_base, rows.data(), first_key[t], pos[t] + 1, weights, n, kWidth,
                                            out + t * out_stride + h * hd + i0, hd);
        }
      }
    }
  }
}

}  // namespace

void attend_rows_avx512(const float* q, int64_t q_stride, const PagedKv& cache, const int32_t* block_table,
                        const int* pos, int count, int num_heads, int num_kv_heads, const AttentionParams& params,
                        float* scratch, float* out, int64_t out_stride) {
  if (cache.element == KvElement::kBf16) {
    return attend_rows_of<uint16_t>(q, q_stride, cache, block_table, pos, count, num_heads, num_kv_heads, params,
                                    scratch, out, out_stride);
  }
  attend_rows_of<float>(q, q_stride, cache, block_table, pos, count, num_heads, num_kv_heads, params, scratch, out,
                        out_stride);
}

#else  // not x86-64: attend_row keeps its portable loop

bool can_attend_row_avx512(int) { return false; }
void attend_rows_avx512(const float*, int64_t, const PagedKv&, const int32_t*, const int*, int, int, int,
                        const AttentionParams&, float*, float*, int64_t) {}

#endif

}  // namespace cbatch::attention_detail
