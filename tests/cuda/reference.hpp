// Plain CPU references of the CUDA kernels, in double: what each kernel must compute, written as
// directly as possible. Layouts match the kernels' (see the launcher headers).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/attention/attention_shape.hpp"

namespace cbatch::test {

// out[r] = (x[r] + delta[r]) / sqrt(mean((x + delta)^2) + eps) * w; x_out = x + delta. delta may be empty.
// With delta_weight (a sandwich norm), delta[r] is normalized first: delta[r] / rms(delta[r]) * delta_weight.
inline void rmsnorm_ref(const std::vector<float>& x, const std::vector<float>& delta, const std::vector<float>& w,
                        int num_rows, int dim, float eps, std::vector<double>& x_out, std::vector<double>& out,
                        const std::vector<float>& delta_weight = {}) {
  x_out.assign(static_cast<size_t>(num_rows) * dim, 0.0);
  out.assign(static_cast<size_t>(num_rows) * dim, 0.0);
  for (int r = 0; r < num_rows; ++r) {
    double delta_inv_rms = 1.0;
    if (!delta_weight.empty()) {
      double delta_sq = 0.0;
      for (int i = 0; i < dim; ++i) {
        const double d = delta[static_cast<size_t>(r) * dim + i];
        delta_sq += d * d;
      }
      delta_inv_rms = 1.0 / std::sqrt(delta_sq / dim + eps);
    }
    double sum_sq = 0.0;
    for (int i = 0; i < dim; ++i) {
      const size_t at = static_cast<size_t>(r) * dim + i;
      // The residual add happens in fp32 on the device: x + float(delta) rounded once (plain delta).
      const double v = delta.empty()          ? x[at]
                       : delta_weight.empty() ? static_cast<double>(x[at] + delta[at])
                                              : x[at] + delta[at] * delta_inv_rms * delta_weight[i];
      x_out[at] = v;
      sum_sq += v * v;
    }
    const double inv_rms = 1.0 / std::sqrt(sum_sq / dim + eps);
    for (int i = 0; i < dim; ++i) {
      const size_t at = static_cast<size_t>(r) * dim + i;
      out[at] = x_out[at] * inv_rms * w[i];
    }
  }
}

// Rotates one head vector (head_dim values) in place at position pos (cos and sin times factor: yarn's and
// longrope's attention factor).
inline void rope_ref(double* head, int head_dim, int pos, const std::vector<float>& inv_freq, bool halves,
                     double factor = 1.0) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];  // the fp32 product both backends use
    const double c = std::cos(static_cast<double>(angle)) * factor;
    const double s = std::sin(static_cast<double>(angle)) * factor;
    const int ia = halves ? i : 2 * i;
    const int ib = halves ? i + half : 2 * i + 1;
    const double a = head[ia];
    const double b = head[ib];
    head[ia] = a * c - b * s;
    head[ib] = a * s + b * c;
  }
}

inline double silu_ref(double a) { return a / (1.0 + std::exp(-a)); }
inline double gelu_tanh_ref(double a) {
  return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (a + 0.044715 * a * a * a)));
}

// y (m, n) = x (m, k) * w^T, w (n, k).
inline std::vector<double> gemm_ref(const std::vector<float>& x, const std::vector<float>& w, int m, int n, int k) {
  std::vector<double> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) acc += static_cast<double>(x[static_cast<size_t>(i) * k + p]) * w[static_cast<size_t>(j) * k + p];
      y[static_cast<size_t>(i) * n + j] = acc;
    }
  }
  return y;
}

// Index of the largest value, the lowest on ties; NaN never wins; 0 for a row of NaN.
inline int32_t argmax_ref(const float* v, int n) {
  int32_t best = -1;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(v[i])) continue;
    if (best < 0 || v[i] > v[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

// A paged KV cache of one layer on the host, in the device layout (num_blocks, num_kv_heads, block_size,
// head_dim), so it can be uploaded as is.
struct HostKvCache {
  int num_blocks = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  std::vector<double> k;  // (num_blocks, num_kv_heads, block_size, head_dim)
  std::vector<double> v;

  HostKvCache(int blocks, int bs, int kv_heads, int hd, double fill)
      : num_blocks(blocks), block_size(bs), num_kv_heads(kv_heads), head_dim(hd),
        k(static_cast<size_t>(blocks) * kv_heads * bs * hd, fill), v(k.size(), fill) {}

  size_t offset(int slot, int kv_head) const {
    return ((static_cast<size_t>(slot / block_size) * num_kv_heads + kv_head) * block_size + slot % block_size) *
           head_dim;
  }
};

// Causal attention of one query head vector q (head_dim) over positions first..pos of a sequence whose
// block table is `table`: softmax(q.k * scale, softcapped) . v, written to out (head_dim). As `scoring`
// says (first: its window's first key; the default: first 0, scale 1 / sqrt(head_dim), no softcap). The
// head's sink logit `sink` (-inf: none) joins the max and the denominator, as the CPU's attend_row
// (scoring.sinks is not read: it points to the device).
inline void attention_ref(const double* q, int pos, const int32_t* table, const HostKvCache& cache, int kv_head,
                          double* out, const AttentionScoring& scoring = {}, double sink = -INFINITY) {
  const int hd = cache.head_dim;
  const double scale = scoring.scale > 0.0f ? scoring.scale : 1.0 / std::sqrt(static_cast<double>(hd));
  const double cap = scoring.softcap;
  const int first = window_first_key(pos, scoring.window);
  std::vector<double> scores(static_cast<size_t>(pos) + 1, 0.0);
  double max_score = sink;
  for (int p = first; p <= pos; ++p) {
    const int slot = table[p / cache.block_size] * cache.block_size + p % cache.block_size;
    const double* k = cache.k.data() + cache.offset(slot, kv_head);
    double dot = 0.0;
    for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
    scores[p] = cap > 0.0 ? cap * std::tanh(dot * scale / cap) : dot * scale;
    max_score = std::max(max_score, scores[p]);
  }
  double sum = 0.0;
  for (int p = first; p <= pos; ++p) {
    scores[p] = std::exp(scores[p] - max_score);
    sum += scores[p];
  }
  sum += std::exp(sink - max_score);  // 0 without a sink
  for (int d = 0; d < hd; ++d) out[d] = 0.0;
  for (int p = first; p <= pos; ++p) {
    const int slot = table[p / cache.block_size] * cache.block_size + p % cache.block_size;
    const double* v = cache.v.data() + cache.offset(slot, kv_head);
    for (int d = 0; d < hd; ++d) out[d] += scores[p] / sum * v[d];
  }
}

}  // namespace cbatch::test
