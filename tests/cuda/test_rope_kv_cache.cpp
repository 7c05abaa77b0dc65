// rope_kv_cache against the CPU reference: q rotated in place, k rotated and v copied into the paged
// cache at each row's slot, nothing stored for slot -1 and no other cache element touched.
#include <doctest/doctest.h>

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

template <typename T>
void check_rope_case(const RopeCase& rc, bool halves) {
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
  const size_t cache_elems = static_cast<size_t>(num_blocks) * block_size * kv_dim;
  DeviceBuffer<T> d_k(cache_elems);
  DeviceBuffer<T> d_v(cache_elems);
  poison(d_k);
  poison(d_v);
  const AttentionShape shape{rc.num_heads, rc.num_kv_heads, hd, block_size, num_blocks};
  rope_kv_cache<T>(d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(), d_slots.get(), d_inv_freq.get(), n, shape,
                   halves, nullptr);

  // Reference: rotate every q and k head of every row; k and v go to the cache at the row's slot.
  std::vector<double> q_ref;
  HostKvCache cache(num_blocks, block_size, rc.num_kv_heads, hd, NAN);
  for (int r = 0; r < n; ++r) {
    std::vector<double> row(qkv.begin() + static_cast<long>(r) * stride, qkv.begin() + static_cast<long>(r + 1) * stride);
    for (int h = 0; h < rc.num_heads + rc.num_kv_heads; ++h) {
      rope_ref(row.data() + static_cast<size_t>(h) * hd, hd, positions[r], inv_freq, halves);
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
  CHECK(rel_error(v_written, v_expected) == 0.0);  // v is copied, not computed
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

}  // namespace cbatch::test
