// The CPU backend's paged attention (cpu_attention.hpp): the portable loops, attend_head's and attend_row's
// arithmetic in a fixed order written out (attention_mul_add, exp_weights' lanes), and the dispatch of
// attend_row and attend_rows to the AVX-512 kernel (cpu_attention_avx512.cpp), which computes the same bits.
// K is read by element, a block's positions side by side (k_cache_index); V a slot's row at a time.
#include "engine/cpu/cpu_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_attention_avx512.hpp"
#include "engine/cpu/cpu_exp.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {

namespace {

using exp_detail::exp_fp32_inline;

// A cache element as fp32 (a bf16's widening is exact).
inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }

inline float capped(float score, float softcap) {
  return softcap > 0.0f ? softcap * std::tanh(score / softcap) : score;
}

// One q head's scores of `count` consecutive positions of one block (count <= kScoreLanes): out[l] is
// capped(q . k_l * scale), k_l the cached key of the l-th position, element i at k + i * block_size + l
// (k: the kv head's first element of the first position, in its block; k_cache_index). Each dot product is
// a chain of attention_mul_add per 8-lane slice (lane j: elements i + j, i = 0, 8, ...), then the fixed
// tree ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)) plus the tail's chain (head_dim % 8 elements):
// the same order for every call, so a score never depends on what else is in the batch, and a vector
// kernel holding positions in its lanes (cpu_attention_avx512.cpp) gets the same bits. The compiler
// vectorizes the loops over positions.
constexpr int kScoreLanes = 16;
template <typename T>
void score_positions(const float* q, const T* k, int block_size, int count, const AttentionParams& params,
                     float* out) {
  float acc[8][kScoreLanes] = {};
  float tail[kScoreLanes] = {};
  const int head_dim = params.head_dim;
  int i = 0;
  for (; i + 8 <= head_dim; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float qv = q[i + j];
      const T* kr = k + static_cast<int64_t>(i + j) * block_size;
      for (int l = 0; l < count; ++l) acc[j][l] = attention_mul_add(qv, widen(kr[l]), acc[j][l]);
    }
  }
  for (; i < head_dim; ++i) {
    const T* kr = k + static_cast<int64_t>(i) * block_size;
    for (int l = 0; l < count; ++l) tail[l] = attention_mul_add(q[i], widen(kr[l]), tail[l]);
  }
  for (int l = 0; l < count; ++l) {
    const float dot = ((acc[0][l] + acc[4][l]) + (acc[1][l] + acc[5][l])) +
                      ((acc[2][l] + acc[6][l]) + (acc[3][l] + acc[7][l])) + tail[l];
    out[l] = capped(dot * params.scale, params.softcap);
  }
}

// Calls f(p, count, block_start, offset) for the positions first..last in runs of at most kScoreLanes
// within one block: positions p..p + count - 1, block_start the slot of their block's first position, p's
// slot block_start + offset.
template <typename F>
void for_each_key_run(const int32_t* block_table, int block_size, int first, int last, F&& f) {
  for (int p = first; p <= last;) {
    const int offset = p % block_size;
    const int count = std::min({kScoreLanes, block_size - offset, last + 1 - p});
    f(p, count, static_cast<int64_t>(block_table[p / block_size]) * block_size, offset);
    p += count;
  }
}

// Output elements of attend_head accumulated at once (in registers).
constexpr int kOutChunk = 64;

// The V cache rows (offsets in elements) of a sequence's positions first, first + 1, ..., walked block by
// block without a division per position.
class PagedRows {
 public:
  PagedRows(const PagedKv& cache, const int32_t* block_table, int first)
      : table_(block_table), block_size_(cache.block_size), kv_dim_(cache.kv_dim), block_(first / cache.block_size),
        offset_(first % cache.block_size) {}
  int64_t next() {
    const int64_t slot = static_cast<int64_t>(table_[block_]) * block_size_ + offset_;
    if (++offset_ == block_size_) offset_ = 0, ++block_;
    return slot * kv_dim_;
  }

 private:
  const int32_t* table_;
  int block_size_, kv_dim_;
  int block_, offset_;
};

}  // namespace

float exp_weights(float* s, int count, float max) {
  float lane[kExpWeightLanes] = {};
  for (int i = 0; i < count; ++i) {
    s[i] = exp_fp32_inline(s[i] - max);
    lane[i % kExpWeightLanes] += s[i];
  }
  for (int width = kExpWeightLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) lane[j] += lane[j + width];
  }
  return lane[0];
}

namespace {

template <typename T>
void attend_head_of(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int kv_head,
                    const AttentionParams& params, float* scratch, float* out, float sink) {
  const T* k_cache = static_cast<const T*>(cache.k);
  const T* v_cache = static_cast<const T*>(cache.v);
  const int head_dim = params.head_dim;
  const int first = params.first_key(pos);
  const int64_t head_offset = static_cast<int64_t>(kv_head) * head_dim;
  float max_score = sink;
  for_each_key_run(block_table, cache.block_size, first, pos, [&](int p, int count, int64_t block_start, int offset) {
    score_positions(q, k_cache + k_cache_index(block_start + offset, static_cast<int>(head_offset), cache.kv_dim,
                                               cache.block_size),
                    cache.block_size, count, params, scratch + p);
    for (int l = 0; l < count; ++l) max_score = std::max(max_score, scratch[p + l]);
  });
  const float sum = exp_weights(scratch + first, pos + 1 - first, max_score) + exp_fp32_inline(sink - max_score);
  for (int p = first; p <= pos; ++p) scratch[p] = scratch[p] / sum;
  // out chunk by chunk, each chunk held while every position's V passes: per element the same sum of
  // weight * v in position order as a whole row at a time.
  for (int i0 = 0; i0 < head_dim; i0 += kOutChunk) {
    float acc[kOutChunk];
    const int width = std::min(kOutChunk, head_dim - i0);
    for (int i = 0; i < kOutChunk; ++i) acc[i] = 0.0f;
    PagedRows v_rows(cache, block_table, first);
    for (int p = first; p <= pos; ++p) {
      const T* v = v_cache + v_rows.next() + head_offset + i0;
      const float weight = scratch[p];
      if (width == kOutChunk) {
        for (int i = 0; i < kOutChunk; ++i) acc[i] = attention_mul_add(weight, widen(v[i]), acc[i]);
      } else {
        for (int i = 0; i < width; ++i) acc[i] = attention_mul_add(weight, widen(v[i]), acc[i]);
      }
    }
    for (int i = 0; i < width; ++i) out[i0 + i] = acc[i];
  }
}

// attend_row's portable loop.
template <typename T>
void attend_row_of(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int num_heads,
                   int num_kv_heads, const AttentionParams& params, float* scratch, float* out) {
  const T* k_cache = static_cast<const T*>(cache.k);
  const T* v_cache = static_cast<const T*>(cache.v);
  const int head_dim = params.head_dim;
  const int first = params.first_key(pos);
  const int n = pos + 1;
  const int group = num_heads / num_kv_heads;
  float* scores = scratch;                           // (num_heads, n)
  float* max_score = scores + static_cast<int64_t>(num_heads) * n;  // (num_heads)
  float* sum = max_score + num_heads;               // (num_heads)
  auto slot_of = [&](int p) {
    return static_cast<int64_t>(block_table[p / cache.block_size]) * cache.block_size + p % cache.block_size;
  };
  for (int h = 0; h < num_heads; ++h) max_score[h] = params.sink(h);
  for_each_key_run(block_table, cache.block_size, first, pos, [&](int p, int count, int64_t block_start, int offset) {
    for (int h = 0; h < num_heads; ++h) {
      float* s = scores + static_cast<int64_t>(h) * n + p;
      score_positions(q + h * head_dim, k_cache + k_cache_index(block_start + offset, (h / group) * head_dim,
                                                                cache.kv_dim, cache.block_size),
                      cache.block_size, count, params, s);
      for (int l = 0; l < count; ++l) max_score[h] = std::max(max_score[h], s[l]);
    }
  });
  for (int h = 0; h < num_heads; ++h) {  // attend_head's sum; the sink adds 0 without one
    sum[h] = exp_weights(scores + h * n + first, n - first, max_score[h]) +
             exp_fp32_inline(params.sink(h) - max_score[h]);
  }
  for (int i = 0; i < num_heads * head_dim; ++i) out[i] = 0.0f;
  for (int p = first; p < n; ++p) {
    const T* v_row = v_cache + slot_of(p) * cache.kv_dim;
    for (int h = 0; h < num_heads; ++h) {
      const float weight = scores[h * n + p] / sum[h];
      const T* v = v_row + (h / group) * head_dim;
      float* o = out + h * head_dim;
      for (int i = 0; i < head_dim; ++i) o[i] = attention_mul_add(weight, widen(v[i]), o[i]);
    }
  }
}

}  // namespace

void attend_head(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int kv_head,
                 const AttentionParams& params, float* scratch, float* out, float sink) {
  if (cache.element == KvElement::kBf16) {
    return attend_head_of<uint16_t>(q, cache, block_table, pos, kv_head, params, scratch, out, sink);
  }
  attend_head_of<float>(q, cache, block_table, pos, kv_head, params, scratch, out, sink);
}

void attend_row(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int num_heads,
                int num_kv_heads, const AttentionParams& params, float* scratch, float* out) {
  if (attention_detail::can_attend_row_avx512(params.head_dim)) {
    return attention_detail::attend_rows_avx512(q, 0, cache, block_table, &pos, 1, num_heads, num_kv_heads, params,
                                                scratch, out, 0);
  }
  if (cache.element == KvElement::kBf16) {
    return attend_row_of<uint16_t>(q, cache, block_table, pos, num_heads, num_kv_heads, params, scratch, out);
  }
  attend_row_of<float>(q, cache, block_table, pos, num_heads, num_kv_heads, params, scratch, out);
}

void attend_rows(const float* q, int64_t q_stride, const PagedKv& cache, const int32_t* block_table, const int* pos,
                 int count, int num_heads, int num_kv_heads, const AttentionParams& params, float* scratch, float* out,
                 int64_t out_stride) {
  if (count < 1 || count > kMaxAttendRows) {
    throw Error("internal error: attend_rows of " + std::to_string(count) + " rows");
  }
  if (attention_detail::can_attend_row_avx512(params.head_dim)) {
    return attention_detail::attend_rows_avx512(q, q_stride, cache, block_table, pos, count, num_heads, num_kv_heads,
                                                params, scratch, out, out_stride);
  }
  for (int t = 0; t < count; ++t) {
    attend_row(q + t * q_stride, cache, block_table, pos[t], num_heads, num_kv_heads, params, scratch,
               out + t * out_stride);
  }
}

}  // namespace cbatch
