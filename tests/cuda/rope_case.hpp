// The RoPE tests' case (test_rope_kv_cache.cpp on the GPU, test_elementwise_emulated.cpp on the host): rows
// at positions on both sides of a longrope threshold and past 8k, one padding row (slot -1), q/k/v in T;
// the family's additions (biases, q/k norms, the long table, the attention factor); the reference of the
// rotated q and of the cache; and the checks of a kernel's outputs against it.
#pragma once
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/attention/attention_shape.hpp"
#include "engine/model/model_config.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

struct RopeCase {
  int num_heads;
  int num_kv_heads;
  int head_dim;
  bool llama3;
};

// The family's additions of a case, on the host: biases (q_dim + 2 kv_dim), q and k norm weights
// (head_dim, or with `whole` q_dim and kv_dim: one norm over all q heads, one over all k heads), the long
// table and where it starts, the attention factor. Empty / INT_MAX / 1: none.
struct RopeFamilyHost {
  std::string name = "llama";
  std::vector<float> bias, q_norm, k_norm, long_inv_freq;
  bool whole = false;
  int long_from = INT_MAX;
  float factor = 1.0f;
  float eps = 1e-6f;
  bool rotates = true;  // false: a NoPE layer (SmolLM3), q and k keep their (biased, normed) values
  int rotary_half = 0;  // partial rotary (Qwen3.5): the first 2 rotary_half dims rotated; 0: all
  bool value_norm = false;  // every v head RMS-normed without weights (Gemma 4)
  bool stores_kv = true;    // false: a layer reading another's K/V (Gemma 4's shared layers): q alone, no cache write
};

// The inputs of one case in T (held as floats) and its reference.
struct RopeRun {
  static constexpr int kBlockSize = 16;
  static constexpr int kNumBlocks = 5;
  RopeCase rc{};
  bool halves = false;
  std::vector<int32_t> positions = {0, 1, 17, 4095, 8191, 300, 77};
  std::vector<int32_t> slots = {3, 16, 79, -1, 40, 0, 63};  // one padding row
  std::vector<float> qkv;       // (rows, q_dim + 2 kv_dim), T values
  std::vector<float> inv_freq;  // (head_dim / 2)
  std::vector<double> q_ref;    // (rows, q_dim)
  HostKvCache cache{kNumBlocks, kBlockSize, 1, 1, NAN};  // reference cache: NaN where nothing is written

  int num_rows() const { return static_cast<int>(positions.size()); }
  int q_dim() const { return rc.num_heads * rc.head_dim; }
  int kv_dim() const { return rc.num_kv_heads * rc.head_dim; }
  int stride() const { return q_dim() + 2 * kv_dim(); }
  AttentionShape shape() const { return {rc.num_heads, rc.num_kv_heads, rc.head_dim, kBlockSize, kNumBlocks}; }
  size_t cache_elems() const { return static_cast<size_t>(kNumBlocks) * kBlockSize * kv_dim(); }
};

inline std::vector<float> inv_freq_for(const RopeCase& rc) {
  ModelConfig config;
  config.head_dim = rc.head_dim;
  config.rope_theta = rc.llama3 ? 500000.0f : 10000.0f;
  config.rope_scaling.type = rc.llama3 ? RopeScalingType::kLlama3 : RopeScalingType::kNone;
  config.rope_scaling.factor = 8.0f;
  std::vector<float> inv_freq(static_cast<size_t>(rc.head_dim / 2));
  rope_inv_freq(config, inv_freq.data());
  return inv_freq;
}

// x (n: a head, or a whole q or k part) = x / rms(x) * w, in double.
inline void head_norm_ref(double* x, int head_dim, const std::vector<float>& w, float eps) {
  double sum_sq = 0.0;
  for (int d = 0; d < head_dim; ++d) sum_sq += x[d] * x[d];
  const double inv_rms = 1.0 / std::sqrt(sum_sq / head_dim + eps);
  for (int d = 0; d < head_dim; ++d) x[d] = x[d] * inv_rms * w[d];
}

// The case's inputs and reference: biases, head norms, then every q and k head of every row rotated; k
// and v go to the cache at the row's slot.
template <typename T>
RopeRun make_rope_run(const RopeCase& rc, bool halves, const RopeFamilyHost& fam) {
  RopeRun run;
  run.rc = rc;
  run.halves = halves;
  const int hd = rc.head_dim, q_dim = run.q_dim(), kv_dim = run.kv_dim(), stride = run.stride();
  run.qkv = round_to<T>(random_vector(static_cast<size_t>(run.num_rows()) * stride, 61 + hd, -2.0f, 2.0f));
  run.inv_freq = inv_freq_for(rc);
  run.cache = HostKvCache(RopeRun::kNumBlocks, RopeRun::kBlockSize, rc.num_kv_heads, hd, NAN);
  for (int r = 0; r < run.num_rows(); ++r) {
    std::vector<double> row(run.qkv.begin() + static_cast<long>(r) * stride,
                            run.qkv.begin() + static_cast<long>(r + 1) * stride);
    for (size_t i = 0; i < fam.bias.size(); ++i) row[i] += fam.bias[i];
    const std::vector<float> ones(static_cast<size_t>(hd), 1.0f);  // the V norm has no weights
    for (int h = 0; h < rc.num_kv_heads && fam.value_norm; ++h) {
      head_norm_ref(row.data() + q_dim + kv_dim + static_cast<size_t>(h) * hd, hd, ones, fam.eps);
    }
    const std::vector<float>& table = run.positions[r] >= fam.long_from ? fam.long_inv_freq : run.inv_freq;
    if (fam.whole) {  // one norm over the q part, one over the k part
      head_norm_ref(row.data(), q_dim, fam.q_norm, fam.eps);
      head_norm_ref(row.data() + q_dim, kv_dim, fam.k_norm, fam.eps);
    }
    for (int h = 0; h < rc.num_heads + rc.num_kv_heads; ++h) {
      double* head = row.data() + static_cast<size_t>(h) * hd;
      if (!fam.q_norm.empty() && !fam.whole) head_norm_ref(head, hd, h < rc.num_heads ? fam.q_norm : fam.k_norm, fam.eps);
      const int rotated = fam.rotary_half > 0 ? 2 * fam.rotary_half : hd;  // the dims past them keep their values
      if (fam.rotates) rope_ref(head, rotated, run.positions[r], table, halves, fam.factor);
    }
    run.q_ref.insert(run.q_ref.end(), row.begin(), row.begin() + q_dim);
    const int slot = run.slots[r];
    if (slot < 0 || !fam.stores_kv) continue;
    for (int h = 0; h < rc.num_kv_heads; ++h) {
      for (int d = 0; d < hd; ++d) {
        run.cache.k[run.cache.offset(slot, h) + d] = row[static_cast<size_t>(q_dim + h * hd + d)];
        run.cache.v[run.cache.offset(slot, h) + d] = row[static_cast<size_t>(q_dim + kv_dim + h * hd + d)];
      }
    }
  }
  return run;
}

// A kernel's outputs (qkv after the kernel, the NaN-poisoned caches after it) against the reference: q
// rotated, the written cache entries, and no other cache entry touched.
template <typename T>
void check_rope_outputs(const RopeRun& run, const RopeFamilyHost& fam, const std::vector<float>& qkv_out,
                        const std::vector<float>& k_out, const std::vector<float>& v_out) {
  std::vector<float> q_out;
  for (int r = 0; r < run.num_rows(); ++r) {
    q_out.insert(q_out.end(), qkv_out.begin() + static_cast<long>(r) * run.stride(),
                 qkv_out.begin() + static_cast<long>(r) * run.stride() + run.q_dim());
  }
  CHECK(rel_error(q_out, run.q_ref) < tolerance<T>());
  std::vector<float> k_written, v_written;
  std::vector<double> k_expected, v_expected;
  size_t stray_writes = 0;
  for (size_t i = 0; i < run.cache_elems(); ++i) {
    if (std::isnan(run.cache.k[i])) {
      stray_writes += !std::isnan(k_out[i]) + !std::isnan(v_out[i]);
      continue;
    }
    k_written.push_back(k_out[i]);
    k_expected.push_back(run.cache.k[i]);
    v_written.push_back(v_out[i]);
    v_expected.push_back(run.cache.v[i]);
  }
  CHECK(k_written.size() == static_cast<size_t>(fam.stores_kv ? 6 * run.kv_dim() : 0));
  CHECK(stray_writes == 0);
  if (!fam.stores_kv) return;
  CHECK(rel_error(k_written, k_expected) < tolerance<T>());
  if (fam.bias.empty() && !fam.value_norm) {
    CHECK(rel_error(v_written, v_expected) == 0.0);  // v is copied, not computed
  } else {
    CHECK(rel_error(v_written, v_expected) < tolerance<T>());  // v + bv, rounded once
  }
}

// Llama's RoPE cases, and the cases of the family build.
inline std::vector<RopeCase> rope_cases() {
  return {{4, 4, 16, false}, {8, 2, 64, true}, {32, 8, 128, true}, {6, 2, 48, false}};
}
// head_dim 512: Gemma 4's global layers.
inline std::vector<RopeCase> rope_family_cases() {
  return {{8, 2, 64, false}, {32, 8, 128, true}, {8, 4, 256, false}, {8, 2, 512, false}};
}

// The family additions for a case: biases (Qwen2), head norms (Qwen3, Gemma 3; weights around 1 + w),
// longrope from position 300 on (the case has rows on both sides) with an attention factor, and all; a NoPE
// layer (SmolLM3) that must neither rotate nor scale; Qwen3.5's partial rotary with q/k norms; Gemma 4's V
// norm (also of biased v), and its shared layers (q alone, nothing cached).
inline std::vector<RopeFamilyHost> rope_families(const RopeCase& rc) {
  const size_t qkv_dim = static_cast<size_t>((rc.num_heads + 2 * rc.num_kv_heads) * rc.head_dim);
  RopeFamilyHost qwen2;
  qwen2.name = "biases";
  qwen2.bias = random_vector(qkv_dim, 91, -2.0f, 2.0f);
  RopeFamilyHost gemma;
  gemma.name = "q/k norms";
  gemma.q_norm = random_vector(static_cast<size_t>(rc.head_dim), 92, 0.5f, 2.0f);
  gemma.k_norm = random_vector(static_cast<size_t>(rc.head_dim), 93, 0.5f, 2.0f);
  RopeFamilyHost phi3 = qwen2;
  phi3.name = "longrope";
  phi3.long_inv_freq = random_vector(static_cast<size_t>(rc.head_dim / 2), 94, 0.0f, 0.05f);
  phi3.long_from = 300;
  phi3.factor = 1.19f;
  RopeFamilyHost all = phi3;
  all.name = "all";
  all.q_norm = gemma.q_norm;
  all.k_norm = gemma.k_norm;
  RopeFamilyHost olmoe;
  olmoe.name = "whole q/k norms";
  olmoe.whole = true;
  olmoe.q_norm = random_vector(static_cast<size_t>(rc.num_heads * rc.head_dim), 95, 0.5f, 2.0f);
  olmoe.k_norm = random_vector(static_cast<size_t>(rc.num_kv_heads * rc.head_dim), 96, 0.5f, 2.0f);
  RopeFamilyHost nope;  // a NoPE layer of a YaRN model: no rotation, and no attention factor either
  nope.name = "NoPE";
  nope.rotates = false;
  nope.factor = 1.2f;
  RopeFamilyHost partial = gemma;  // Qwen3.5: q/k norms, a quarter of each head rotated (halves paired in it)
  partial.name = "partial rotary";
  partial.rotary_half = rc.head_dim / 8;
  RopeFamilyHost gemma4 = gemma;  // Gemma 4: q/k norms and the v heads' norm without weights
  gemma4.name = "V norm";
  gemma4.value_norm = true;
  RopeFamilyHost biased_v = qwen2;  // the V norm of v + bv
  biased_v.name = "V norm of biased v";
  biased_v.value_norm = true;
  RopeFamilyHost shared = gemma4;  // a Gemma 4 layer reading another's K/V: q normed and rotated, nothing stored
  shared.name = "shared K/V";
  shared.stores_kv = false;
  return {qwen2, gemma, phi3, all, olmoe, nope, partial, gemma4, biased_v, shared};
}

}  // namespace cbatch::test
