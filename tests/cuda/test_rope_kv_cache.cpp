// rope_kv_cache against the CPU reference: q rotated in place, k rotated and v copied into the paged
// cache at each row's slot, nothing stored for slot -1 and no other cache element touched; and its family
// build: q/k/v biases, q/k head norms, the longrope table from a position on, the attention factor.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/rope_kv_cache.hpp"
#include "engine/model/model_config.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

namespace {

struct RopeCase {
  int num_heads;
  int num_kv_heads;
  int head_dim;
  bool llama3;
};

std::vector<float> inv_freq_for(const RopeCase& rc) {
  ModelConfig config;
  config.head_dim = rc.head_dim;
  config.rope_theta = rc.llama3 ? 500000.0f : 10000.0f;
  config.rope_scaling.type = rc.llama3 ? RopeScalingType::kLlama3 : RopeScalingType::kNone;
  config.rope_scaling.factor = 8.0f;
  std::vector<float> inv_freq(static_cast<size_t>(rc.head_dim / 2));
  rope_inv_freq(config, inv_freq.data());
  return inv_freq;
}

// The family's additions of a case, on the host: biases (q_dim + 2 kv_dim), q and k norm weights
// (head_dim), the long table and where it starts, the attention factor. Empty / INT_MAX / 1: none.
struct RopeFamilyHost {
  std::vector<float> bias, q_norm, k_norm, long_inv_freq;
  int long_from = INT_MAX;
  float factor = 1.0f;
  float eps = 1e-6f;
};

// x (head_dim) = x / rms(x) * w, in double.
void head_norm_ref(double* x, int head_dim, const std::vector<float>& w, float eps) {
  double sum_sq = 0.0;
  for (int d = 0; d < head_dim; ++d) sum_sq += x[d] * x[d];
  const double inv_rms = 1.0 / std::sqrt(sum_sq / head_dim + eps);
  for (int d = 0; d < head_dim; ++d) x[d] = x[d] * inv_rms * w[d];
}

template <typename T>
void check_rope_case(const RopeCase& rc, bool halves, const RopeFamilyHost& fam = {}) {
  const int hd = rc.head_dim;
  const int block_size = 16;
  const int num_blocks = 5;
  const std::vector<int32_t> positions = {0, 1, 17, 4095, 8191, 300, 77};
  const std::vector<int32_t> slots = {3, 16, 79, -1, 40, 0, 63};  // one padding row
  const int n = static_cast<int>(positions.size());
  const int q_dim = rc.num_heads * hd;
  const int kv_dim = rc.num_kv_heads * hd;
  const int stride = q_dim + 2 * kv_dim;
  const std::vector<float> qkv = round_to<T>(random_vector(static_cast<size_t>(n) * stride, 61 + hd, -2.0f, 2.0f));
  const std::vector<float> inv_freq = inv_freq_for(rc);

  auto d_qkv = to_device<T>(qkv);
  auto d_positions = to_device_i32(positions);
  auto d_slots = to_device_i32(slots);
  auto d_inv_freq = to_device<float>(inv_freq);
  auto d_bias = to_device<float>(fam.bias);
  auto d_q_norm = to_device<float>(fam.q_norm);
  auto d_k_norm = to_device<float>(fam.k_norm);
  auto d_long = to_device<float>(fam.long_inv_freq);
  RopeFamily family;
  family.qkv_bias = d_bias.get();  // null when empty
  family.q_norm = d_q_norm.get();
  family.k_norm = d_k_norm.get();
  family.norm_eps = fam.eps;
  family.long_inv_freq = d_long.get();
  family.long_from = fam.long_from;
  family.attention_factor = fam.factor;
  const size_t cache_elems = static_cast<size_t>(num_blocks) * block_size * kv_dim;
  DeviceBuffer<T> d_k(cache_elems);
  DeviceBuffer<T> d_v(cache_elems);
  poison(d_k);
  poison(d_v);
  const AttentionShape shape{rc.num_heads, rc.num_kv_heads, hd, block_size, num_blocks};
  rope_kv_cache<T>(d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(), d_slots.get(), d_inv_freq.get(), n, shape,
                   halves, nullptr, family);

  // Reference: biases, head norms, then rotate every q and k head of every row; k and v go to the cache
  // at the row's slot.
  std::vector<double> q_ref;
  HostKvCache cache(num_blocks, block_size, rc.num_kv_heads, hd, NAN);
  for (int r = 0; r < n; ++r) {
    std::vector<double> row(qkv.begin() + static_cast<long>(r) * stride, qkv.begin() + static_cast<long>(r + 1) * stride);
    for (size_t i = 0; i < fam.bias.size(); ++i) row[i] += fam.bias[i];
    const std::vector<float>& table = positions[r] >= fam.long_from ? fam.long_inv_freq : inv_freq;
    for (int h = 0; h < rc.num_heads + rc.num_kv_heads; ++h) {
      double* head = row.data() + static_cast<size_t>(h) * hd;
      if (!fam.q_norm.empty()) head_norm_ref(head, hd, h < rc.num_heads ? fam.q_norm : fam.k_norm, fam.eps);
      rope_ref(head, hd, positions[r], table, halves, fam.factor);
    }
    q_ref.insert(q_ref.end(), row.begin(), row.begin() + q_dim);
    if (slots[r] < 0) continue;
    for (int h = 0; h < rc.num_kv_heads; ++h) {
      for (int d = 0; d < hd; ++d) {
        cache.k[cache.offset(slots[r], h) + d] = row[static_cast<size_t>(q_dim + h * hd + d)];
        cache.v[cache.offset(slots[r], h) + d] = row[static_cast<size_t>(q_dim + kv_dim + h * hd + d)];
      }
    }
  }

  const std::vector<float> qkv_out = to_host(d_qkv);
  std::vector<float> q_out;
  for (int r = 0; r < n; ++r) {
    q_out.insert(q_out.end(), qkv_out.begin() + static_cast<long>(r) * stride,
                 qkv_out.begin() + static_cast<long>(r) * stride + q_dim);
  }
  CHECK(rel_error(q_out, q_ref) < tolerance<T>());

  // Written cache entries match, every other entry is still the NaN poison.
  const std::vector<float> k_out = to_host(d_k);
  const std::vector<float> v_out = to_host(d_v);
  std::vector<float> k_written, v_written;
  std::vector<double> k_expected, v_expected;
  size_t stray_writes = 0;
  for (size_t i = 0; i < cache_elems; ++i) {
    if (std::isnan(cache.k[i])) {
      stray_writes += !std::isnan(k_out[i]) + !std::isnan(v_out[i]);
      continue;
    }
    k_written.push_back(k_out[i]);
    k_expected.push_back(cache.k[i]);
    v_written.push_back(v_out[i]);
    v_expected.push_back(cache.v[i]);
  }
  CHECK(k_written.size() == static_cast<size_t>(6 * kv_dim));
  CHECK(stray_writes == 0);
  CHECK(rel_error(k_written, k_expected) < tolerance<T>());
  if (fam.bias.empty()) {
    CHECK(rel_error(v_written, v_expected) == 0.0);  // v is copied, not computed
  } else {
    CHECK(rel_error(v_written, v_expected) < tolerance<T>());  // v + bv, rounded once
  }
}

}  // namespace

TEST_CASE_TEMPLATE("rope_kv_cache rotates q and k and fills the paged cache", T, float, __nv_bfloat16, __half) {
  const RopeCase cases[] = {{4, 4, 16, false}, {8, 2, 64, true}, {32, 8, 128, true}, {6, 2, 48, false}};
  for (const RopeCase& rc : cases) {
    for (bool halves : {false, true}) {
      CAPTURE(rc.head_dim);
      CAPTURE(rc.num_heads);
      CAPTURE(rc.num_kv_heads);
      CAPTURE(halves);
      check_rope_case<T>(rc, halves);
    }
  }
}

TEST_CASE_TEMPLATE("rope_kv_cache's family build: biases, q/k norms, longrope table, attention factor", T, float,
                   __nv_bfloat16, __half) {
  const RopeCase cases[] = {{8, 2, 64, false}, {32, 8, 128, true}, {8, 4, 256, false}};
  for (const RopeCase& rc : cases) {
    const int q_dim = rc.num_heads * rc.head_dim, kv_dim = rc.num_kv_heads * rc.head_dim;
    const size_t half = static_cast<size_t>(rc.head_dim / 2);
    RopeFamilyHost qwen2;  // biases (Qwen2)
    qwen2.bias = random_vector(static_cast<size_t>(q_dim + 2 * kv_dim), 91, -2.0f, 2.0f);
    RopeFamilyHost gemma;  // head norms (Qwen3, Gemma 3) with weights around 1 + w
    gemma.q_norm = random_vector(static_cast<size_t>(rc.head_dim), 92, 0.5f, 2.0f);
    gemma.k_norm = random_vector(static_cast<size_t>(rc.head_dim), 93, 0.5f, 2.0f);
    RopeFamilyHost phi3 = qwen2;  // longrope from position 300 on (the case has rows on both sides), factor
    phi3.long_inv_freq = random_vector(half, 94, 0.0f, 0.05f);
    phi3.long_from = 300;
    phi3.factor = 1.19f;
    RopeFamilyHost all = phi3;
    all.q_norm = gemma.q_norm;
    all.k_norm = gemma.k_norm;
    for (const RopeFamilyHost* fam : {&qwen2, &gemma, &phi3, &all}) {
      for (bool halves : {false, true}) {
        CAPTURE(rc.head_dim);
        CAPTURE(halves);
        CAPTURE(fam == &qwen2 ? "biases" : fam == &gemma ? "q/k norms" : fam == &phi3 ? "longrope" : "all");
        check_rope_case<T>(rc, halves, *fam);
      }
    }
  }
}

}  // namespace cbatch::test
