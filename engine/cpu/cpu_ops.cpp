#include "engine/cpu/cpu_ops.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_attention_avx512.hpp"
#include "engine/cpu/cpu_exp.hpp"
#include "engine/cpu/cpu_glu_avx512.hpp"

namespace cbatch {

void rmsnorm_row(const float* x, const float* weight, float* out, int dim, float eps) {
  float sum_sq = 0.0f;
  for (int i = 0; i < dim; ++i) sum_sq += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; ++i) out[i] = x[i] * scale * weight[i];
}

void layernorm_row(const float* x, const float* weight, const float* bias, float* out, int dim, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < dim; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(dim);
  float sum_sq = 0.0f;
  for (int i = 0; i < dim; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; ++i) out[i] = (x[i] - mean) * scale * weight[i] + bias[i];
}

void rope_angles(int pos, const float* inv_freq, int head_dim, float* cos_out, float* sin_out) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos_out[i] = std::cos(angle);
    sin_out[i] = std::sin(angle);
  }
}

void rope_head(float* v, int head_dim, const float* cos, const float* sin, RopeLayout layout) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cos[i];
    const float s = sin[i];
    const int ia = layout == RopeLayout::kAdjacentPairs ? 2 * i : i;
    const int ib = layout == RopeLayout::kAdjacentPairs ? 2 * i + 1 : i + half;
    const float a = v[ia];
    const float b = v[ib];
    v[ia] = a * c - b * s;
    v[ib] = a * s + b * c;
  }
}

namespace {

// exp_fp32, tanh_fp32 and gelu_tanh, inline for the loops over them (cpu_glu_avx512.cpp repeats them on 16
// lanes).

// e^t = s (expm1(r) + 1): s = 2^k, exact, and rq = expm1(r), for t = k ln2 + r, |r| <= ln2 / 2 (|t| below
// 700, where 2^k is a normal double).
inline void exp_parts(double t, double& s, double& rq) {
  using namespace exp_detail;
  const double k = std::nearbyint(t * kInvLn2);
  double r = std::fma(-k, kLn2High, t);
  r = std::fma(-k, kLn2Low, r);
  double q = kExpm1Taylor[kExpm1Terms - 1];
  for (int i = kExpm1Terms - 2; i >= 0; --i) q = std::fma(q, r, kExpm1Taylor[static_cast<size_t>(i)]);
  s = std::bit_cast<double>(static_cast<uint64_t>(static_cast<int64_t>(k) + 1023) << 52);
  rq = r * q;
}

inline float exp_fp32_inline(float x) {
  using namespace exp_detail;
  if (std::isnan(x)) return x;
  double s, rq;
  exp_parts(std::clamp(x, kExpMin, kExpMax), s, rq);
  return static_cast<float>(std::fma(s, rq, s));  // 2^k expm1(r) + 2^k, one rounding
}

inline float tanh_fp32_inline(float x) {
  using namespace glu_detail;
  const float abs_x = std::fabs(x);
  const double a = abs_x < kTanhCap ? abs_x : kTanhCap;  // NaN too becomes the cap (its result is replaced)
  double s, rq;
  exp_parts(2.0 * a, s, rq);
  const double e = std::fma(s, rq, s - 1.0);  // expm1(2a) = 2^k expm1(r) + 2^k - 1, one rounding
  const auto y = static_cast<float>(e / (e + 2.0));
  return std::isnan(x) ? x : std::copysign(y, x);
}

inline float gelu_tanh_inline(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  const float inner = std::fma(0.044715f * x * x, x, x);  // x + 0.044715 x^3
  return 0.5f * x * (1.0f + tanh_fp32_inline(kSqrt2OverPi * inner));
}

}  // namespace

float exp_fp32(float x) { return exp_fp32_inline(x); }
float tanh_fp32(float x) { return tanh_fp32_inline(x); }
float gelu_tanh(float x) { return gelu_tanh_inline(x); }

// erf(x) as x P(x^2) / Q(x^2) on [-4, 4] (outside, erf is +-1 in fp32): a rational fit of this project's
// (least squares reweighted towards the largest error, on 6,000 points of [0, 4]); at most 3.4e-7 from
// erf in fp32, a few units in the last place. Branch-free, so loops over it vectorize (libm's erff does
// not, and took 12% of an encoder's time).
inline float erf_rational(float x) {
  x = std::clamp(x, -4.0f, 4.0f);
  const float z = x * x;
  float p = -1.370939995e-08f;
  for (float c : {4.788970742e-06f, 3.829920641e-04f, 3.839808595e-03f, 5.433773028e-02f, 1.846946406e-01f,
                  1.128379183e+00f}) {
    p = p * z + c;
  }
  float q = 6.408891947e-05f;
  for (float c : {1.310036142e-03f, 1.545515348e-02f, 1.138261990e-01f, 4.970149149e-01f, 1.0f}) q = q * z + c;
  return x * p / q;
}

float gelu_erf(float x) { return 0.5f * x * (1.0f + erf_rational(x * 0.7071067811865476f)); }

void plain_ffn_row(const float* up, const float* bias, float* out, int hidden, Activation activation) {
  if (activation == Activation::kGeluErf) {  // a loop of its own: it vectorizes
    for (int i = 0; i < hidden; ++i) out[i] = gelu_erf(up[i] + bias[i]);
    return;
  }
  for (int i = 0; i < hidden; ++i) {
    const float u = up[i] + bias[i];
    out[i] = activation == Activation::kGeluTanh ? gelu_tanh(u) : u / (1.0f + exp_fp32_inline(-u));
  }
}

void gated_ffn_cols(const float* gate, const float* up, float* out, int count, const GluParams& glu) {
  if (glu.kind == Activation::kGeluTanh) {
    if (glu_detail::can_glu_avx512()) return glu_detail::geglu_avx512(gate, up, out, count);
    for (int i = 0; i < count; ++i) out[i] = gelu_tanh_inline(gate[i]) * up[i];
    return;
  }
  if (glu.kind == Activation::kGeluErf) {
    for (int i = 0; i < count; ++i) out[i] = gelu_erf(gate[i]) * up[i];
    return;
  }
  if (glu.kind == Activation::kSwigluClamped) {
    for (int i = 0; i < count; ++i) {
      const float g = std::min(gate[i], glu.limit);
      const float u = std::clamp(up[i], -glu.limit, glu.limit);
      out[i] = (u + 1.0f) * (g / (1.0f + exp_fp32_inline(-glu.alpha * g)));
    }
    return;
  }
  if (glu_detail::can_glu_avx512()) return glu_detail::swiglu_avx512(gate, up, out, count);
  for (int i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + exp_fp32_inline(-g)) * up[i];
  }
}

void gated_ffn_row(const float* gate_up, float* out, int hidden, const GluParams& glu) {
  gated_ffn_cols(gate_up, gate_up + hidden, out, hidden, glu);
}

int32_t first_argmax(const float* values, int n) {
  constexpr int kLanes = 16;
  if (n <= 0 || std::isnan(values[0])) return 0;
  float lane_max[kLanes];  // lane j: the largest of values[j], values[j + 16], ... (NaNs skipped)
  std::fill_n(lane_max, kLanes, -INFINITY);
  const int whole = n / kLanes * kLanes;
  for (int i = 0; i < whole; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane_max[j] = values[i + j] > lane_max[j] ? values[i + j] : lane_max[j];
  }
  float best = values[0];  // not NaN: the answer's value is at least this
  for (float m : lane_max) best = m > best ? m : best;
  for (int i = whole; i < n; ++i) best = values[i] > best ? values[i] : best;
  for (int i = 0; i < whole; i += kLanes) {  // the first block holding best (0 and -0 are equal, as in argmax_row)
    bool found = false;
    for (int j = 0; j < kLanes; ++j) found |= values[i + j] == best;
    if (!found) continue;
    for (int j = 0; j < kLanes; ++j)
      if (values[i + j] == best) return i + j;
  }
  for (int i = whole; i < n; ++i)
    if (values[i] == best) return i;
  return 0;  // not reached: best is one of the values
}

void softcap_row(float* values, int n, float cap) {
  for (int i = 0; i < n; ++i) values[i] = cap * std::tanh(values[i] / cap);
}

namespace {

// q . k with eight independent partial sums (the compiler vectorizes them) added in a fixed tree: the same
// order for every call, so a score never depends on what else is in the batch.
// (GCC does not vectorize the fused lanes by itself: with FMA and AVX, one 8-lane register holds them.)
inline float dot_fixed_order(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
#if defined(CBATCH_ATTENTION_FMA) && defined(__AVX__) && defined(__FMA__)
  __m256 lanes = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) lanes = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), lanes);
  _mm256_storeu_ps(acc, lanes);
#else
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] = attention_mul_add(a[i + j], b[i + j], acc[j]);
  }
#endif
  float tail = 0.0f;
  for (; i < n; ++i) tail = attention_mul_add(a[i], b[i], tail);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// Output elements of attend_head accumulated at once (in registers).
constexpr int kOutChunk = 64;

// The cache rows (offsets in floats) of a sequence's positions first, first + 1, ..., walked block by
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

inline float capped(float score, float softcap) {
  return softcap > 0.0f ? softcap * std::tanh(score / softcap) : score;
}

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

void attend_head(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int kv_head,
                 const AttentionParams& params, float* scratch, float* out, float sink) {
  const int head_dim = params.head_dim;
  const float scale = params.scale;
  const int first = params.first_key(pos);
  const int64_t head_offset = static_cast<int64_t>(kv_head) * head_dim;
  float max_score = sink;
  PagedRows rows(cache, block_table, first);
  int p = first;
  for (; p <= pos; ++p) {
    scratch[p] = capped(dot_fixed_order(q, cache.k + rows.next() + head_offset, head_dim) * scale, params.softcap);
    max_score = std::max(max_score, scratch[p]);
  }
  const float sum = exp_weights(scratch + first, pos + 1 - first, max_score) + exp_fp32_inline(sink - max_score);
  for (p = first; p <= pos; ++p) scratch[p] = scratch[p] / sum;
  // out chunk by chunk, each chunk held while every position's V passes: per element the same sum of
  // weight * v in position order as a whole row at a time.
  for (int i0 = 0; i0 < head_dim; i0 += kOutChunk) {
    float acc[kOutChunk];
    const int width = std::min(kOutChunk, head_dim - i0);
    for (int i = 0; i < kOutChunk; ++i) acc[i] = 0.0f;
    PagedRows v_rows(cache, block_table, first);
    for (p = first; p <= pos; ++p) {
      const float* v = cache.v + v_rows.next() + head_offset + i0;
      const float weight = scratch[p];
      if (width == kOutChunk) {
        for (int i = 0; i < kOutChunk; ++i) acc[i] = attention_mul_add(weight, v[i], acc[i]);
      } else {
        for (int i = 0; i < width; ++i) acc[i] = attention_mul_add(weight, v[i], acc[i]);
      }
    }
    for (int i = 0; i < width; ++i) out[i0 + i] = acc[i];
  }
}

void attend_row(const float* q, const PagedKv& cache, const int32_t* block_table, int pos, int num_heads,
                int num_kv_heads, const AttentionParams& params, float* scratch, float* out) {
  if (attention_detail::can_attend_row_avx512(params.head_dim)) {
    return attention_detail::attend_rows_avx512(q, 0, cache, block_table, &pos, 1, num_heads, num_kv_heads, params,
                                                scratch, out, 0);
  }
  const int head_dim = params.head_dim;
  const float scale = params.scale;
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
  // A block is usually one page per layer, where hardware prefetchers stop: fetch the K and V rows a few
  // positions ahead by hand (V is read in the third pass; it waits in cache).
  constexpr int kAhead = 4;
  const int64_t row_bytes = static_cast<int64_t>(cache.kv_dim) * sizeof(float);
  for (int p = first; p < n; ++p) {
    if (p + kAhead < n) {
      const int64_t ahead = slot_of(p + kAhead) * cache.kv_dim;
      for (int64_t b = 0; b < row_bytes; b += 64) {
        __builtin_prefetch(reinterpret_cast<const char*>(cache.k + ahead) + b);
        __builtin_prefetch(reinterpret_cast<const char*>(cache.v + ahead) + b);
      }
    }
    const float* k_row = cache.k + slot_of(p) * cache.kv_dim;
    for (int h = 0; h < num_heads; ++h) {
      const float s = capped(dot_fixed_order(q + h * head_dim, k_row + (h / group) * head_dim, head_dim) * scale,
                             params.softcap);
      scores[h * n + p] = s;
      max_score[h] = std::max(max_score[h], s);
    }
  }
  for (int h = 0; h < num_heads; ++h) {  // attend_head's sum; the sink adds 0 without one
    sum[h] = exp_weights(scores + h * n + first, n - first, max_score[h]) +
             exp_fp32_inline(params.sink(h) - max_score[h]);
  }
  for (int i = 0; i < num_heads * head_dim; ++i) out[i] = 0.0f;
  for (int p = first; p < n; ++p) {
    const float* v_row = cache.v + slot_of(p) * cache.kv_dim;
    for (int h = 0; h < num_heads; ++h) {
      const float weight = scores[h * n + p] / sum[h];
      const float* v = v_row + (h / group) * head_dim;
      float* o = out + h * head_dim;
      for (int i = 0; i < head_dim; ++i) o[i] = attention_mul_add(weight, v[i], o[i]);
    }
  }
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
