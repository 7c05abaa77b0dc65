// attend_row's AVX-512 kernel (cpu_attention_avx512.hpp), compiled for AVX-512 with target attributes and
// chosen at run time. Scores: two q heads per register (lanes 0-7 head h, 8-15 head h + 1), each lane an
// 8-lane slice of dot_fixed_order's partial sums, so one K row load serves both; values: up to 4 q heads
// of one kv head at once, each V row loaded once for them, 64 output elements per head held in registers.
// attend_rows' rows of one sequence share each K row load, and each 64-element pass over V.
#include "engine/cpu/cpu_attention_avx512.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/cpu/cpu_exp.hpp"

// GCC 12's false positive on the AVX-512 intrinsics' undefined pass-through operand (as in the int8 kernels).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace cbatch::attention_detail {

#if defined(__x86_64__)
namespace {

#define CBATCH_AVX512 __attribute__((target("avx512f,avx512dq")))

constexpr int kOutRegisters = 4;  // output registers per head in weighted_values: 64 elements

// attention_mul_add (cpu_ops.hpp) on 16 lanes: a * b + c, fused where the build's CPU has FMA, else the
// product (out of the compiler's sight, so that it is not contracted) then the add.
CBATCH_AVX512 inline __m512 mul_add(__m512 a, __m512 b, __m512 c) {
#if defined(CBATCH_ATTENTION_FMA)
  return _mm512_fmadd_ps(a, b, c);
#else
  __m512 p = _mm512_mul_ps(a, b);
  asm("" : "+v"(p));
  return _mm512_add_ps(p, c);
#endif
}

// dot_fixed_order's tree over each 8-lane half of acc: ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)),
// plus its (empty) tail.
CBATCH_AVX512 inline void reduce_halves(__m512 acc, float& lo, float& hi) {
  const __m512 s1 = _mm512_add_ps(acc, _mm512_shuffle_f32x4(acc, acc, _MM_SHUFFLE(2, 3, 0, 1)));  // lane j ^ 4
  const __m512 s2 = _mm512_add_ps(s1, _mm512_permute_ps(s1, _MM_SHUFFLE(2, 3, 0, 1)));           // lane j ^ 1
  const __m512 s3 = _mm512_add_ps(s2, _mm512_permute_ps(s2, _MM_SHUFFLE(1, 0, 3, 2)));           // lane j ^ 2
  lo = _mm512_cvtss_f32(s3) + 0.0f;
  hi = _mm_cvtss_f32(_mm512_extractf32x4_ps(s3, 2)) + 0.0f;
}

inline float capped(float score, float softcap) {
  return softcap > 0.0f ? softcap * std::tanh(score / softcap) : score;
}

// q . k for heads h0 (lanes 0-7) and h1 (lanes 8-15): qp (head_dim / 8, 16) the two heads' q interleaved by
// 8-lane slices, k0 and k1 their K rows (the same row when they share a kv head).
CBATCH_AVX512 inline void dot_pair(const float* qp, const float* k0, const float* k1, int head_dim, float& d0,
                                   float& d1) {
  __m512 acc = _mm512_setzero_ps();
  if (k0 == k1) {
    for (int i = 0; i < head_dim; i += 8) {
      const __m512 k = _mm512_broadcast_f32x8(_mm256_loadu_ps(k0 + i));
      acc = mul_add(_mm512_loadu_ps(qp + 2 * i), k, acc);
    }
  } else {
    for (int i = 0; i < head_dim; i += 8) {
      const __m512 k = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(k0 + i)), _mm256_loadu_ps(k1 + i), 1);
      acc = mul_add(_mm512_loadu_ps(qp + 2 * i), k, acc);
    }
  }
  reduce_halves(acc, d0, d1);
}

// out[h * out_stride + i] for i < width of NH consecutive q heads reading one kv head: per element
// mul_add(weight, v, acc) over positions first..n - 1 in order, from zero. weights (NH, stride) by position;
// rows: each position's offset of its cache row, plus the kv head's (and the first element's).
template <int NH, int NZ>
CBATCH_AVX512 void weighted_values(const float* v_base, const int64_t* rows, int first, int n, const float* weights,
                                   int stride, int width, float* out, int out_stride) {
  for (int i0 = 0; i0 < width; i0 += 16 * NZ) {
    __m512 acc[NH][NZ];
    for (auto& head : acc)
      for (auto& a : head) a = _mm512_setzero_ps();
    for (int p = first; p < n; ++p) {
      const float* v = v_base + rows[p] + i0;
      __m512 vz[NZ];
      for (int z = 0; z < NZ; ++z) vz[z] = _mm512_loadu_ps(v + 16 * z);
      for (int h = 0; h < NH; ++h) {
        const __m512 w = _mm512_set1_ps(weights[h * stride + p]);
        for (int z = 0; z < NZ; ++z) acc[h][z] = mul_add(w, vz[z], acc[h][z]);
      }
    }
    for (int h = 0; h < NH; ++h)
      for (int z = 0; z < NZ; ++z) _mm512_storeu_ps(out + h * out_stride + i0 + 16 * z, acc[h][z]);
  }
}

template <int NZ>
void weighted_values_of(int num, const float* v_base, const int64_t* rows, int first, int n, const float* weights,
                        int stride, int width, float* out, int out_stride) {
  switch (num) {
    case 1: return weighted_values<1, NZ>(v_base, rows, first, n, weights, stride, width, out, out_stride);
    case 2: return weighted_values<2, NZ>(v_base, rows, first, n, weights, stride, width, out, out_stride);
    case 3: return weighted_values<3, NZ>(v_base, rows, first, n, weights, stride, width, out, out_stride);
    default: return weighted_values<4, NZ>(v_base, rows, first, n, weights, stride, width, out, out_stride);
  }
}

// exp_weights (cpu_ops.hpp) 16 at a time: lane i of the accumulator is exp_weights' lane i.
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

// Scores of every head of every row and each head's running max: each position's K row is loaded once for
// all the rows that see it.
CBATCH_AVX512 void score_rows(const RowTile& tile, const PagedKv& cache, const int64_t* rows, int first, int n,
                              int num_heads, int group, const AttentionParams& params) {
  const int hd = params.head_dim;
  const int num_pairs = (num_heads + 1) / 2;
  const int64_t pairs_size = static_cast<int64_t>(num_pairs) * 2 * hd;
  thread_local std::vector<float> pairs;  // per row (num_pairs, hd / 8, 16): heads 2i and 2i + 1 by 8-lane slices
  pairs.resize(static_cast<size_t>(tile.count * pairs_size));
  for (int t = 0; t < tile.count; ++t) {
    const float* q = tile.q + t * tile.q_stride;
    float* row_pairs = &pairs[static_cast<size_t>(t * pairs_size)];
    for (int pr = 0; pr < num_pairs; ++pr) {
      const int h0 = 2 * pr, h1 = std::min(2 * pr + 1, num_heads - 1);  // an odd last head pairs with itself
      for (int i = 0; i < hd; i += 8) {
        std::copy_n(q + h0 * hd + i, 8, row_pairs + pr * 2 * hd + 2 * i);
        std::copy_n(q + h1 * hd + i, 8, row_pairs + pr * 2 * hd + 2 * i + 8);
      }
    }
  }
  constexpr int kAhead = 4;  // K and V rows fetched a few positions ahead (a block is often a page)
  const int64_t row_bytes = static_cast<int64_t>(cache.kv_dim) * sizeof(float);
  for (int p = first; p < n; ++p) {
    if (p + kAhead < n) {
      for (int64_t b = 0; b < row_bytes; b += 64) {
        __builtin_prefetch(reinterpret_cast<const char*>(cache.k + rows[p + kAhead]) + b);
        __builtin_prefetch(reinterpret_cast<const char*>(cache.v + rows[p + kAhead]) + b);
      }
    }
    const float* k_row = cache.k + rows[p];
    for (int t = 0; t < tile.count; ++t) {
      if (p < tile.first[t] || p > tile.pos[t]) continue;
      float* scores = tile.scores_of(t);
      float* max_score = tile.max_of(t, num_heads);
      const float* row_pairs = &pairs[static_cast<size_t>(t * pairs_size)];
      for (int pr = 0; pr < num_pairs; ++pr) {
        const int h0 = 2 * pr, h1 = std::min(2 * pr + 1, num_heads - 1);
        float d[2];
        dot_pair(row_pairs + pr * 2 * hd, k_row + (h0 / group) * hd, k_row + (h1 / group) * hd, hd, d[0], d[1]);
        for (int j = 0; j < (h1 != h0 ? 2 : 1); ++j) {
          const int h = h0 + j;
          const float s = capped(d[j] * params.scale, params.softcap);
          scores[h * tile.stride + p] = s;
          max_score[h] = std::max(max_score[h], s);
        }
      }
    }
  }
}

}  // namespace

bool can_attend_row_avx512(int head_dim) {
  static const bool has_avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return has_avx512 && head_dim > 0 && head_dim % kHeadDimMultiple == 0;
}

void attend_rows_avx512(const float* q, int64_t q_stride, const PagedKv& cache, const int32_t* block_table,
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
  for (int t = 0; t < count; ++t) {
    for (int h = 0; h < num_heads; ++h) tile.max_of(t, num_heads)[h] = params.sink(h);
  }
  score_rows(tile, cache, rows.data(), first, n, num_heads, group, params);
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
        const float* v_base = cache.v + static_cast<int64_t>(kv) * hd + i0;
        for (int t = 0; t < count; ++t) {
          const float* weights = tile.scores_of(t) + static_cast<int64_t>(h) * n;
          weighted_values_of<kOutRegisters>(num, v_base, rows.data(), first_key[t], pos[t] + 1, weights, n, kWidth,
                                            out + t * out_stride + h * hd + i0, hd);
        }
      }
    }
  }
}

#else  // not x86-64: attend_row keeps its portable loop

bool can_attend_row_avx512(int) { return false; }
void attend_rows_avx512(const float*, int64_t, const PagedKv&, const int32_t*, const int*, int, int, int,
                        const AttentionParams&, float*, float*, int64_t) {}

#endif

}  // namespace cbatch::attention_detail
