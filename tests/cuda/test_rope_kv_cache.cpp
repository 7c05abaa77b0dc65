// rope_kv_cache against the CPU reference (rope_case.hpp): q rotated in place, k rotated and v copied into
// the paged cache at each row's slot, nothing stored for slot -1 and no other cache element touched; and
// its family build: q/k/v biases, q/k head norms, the longrope table from a position on, the attention
// factor; and its write of an FP8 cache. test_elementwise_emulated.cpp runs the kernel's block code on the
// same cases without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/attention/rope_kv_cache.hpp"
#include "cuda/common/cuda_check.hpp"
#include "engine/model/fp8.hpp"
#include "tests/cuda/rope_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

namespace {

// A case's inputs on the device, and rope_kv_cache on them into caches of KV (their old contents kept).
template <typename T>
struct DeviceRope {
  const RopeRun& run;
  DeviceBuffer<T> qkv;
  DeviceBuffer<int32_t> positions, slots;
  DeviceBuffer<float> inv_freq, bias, q_norm, k_norm, long_inv_freq;
  RopeFamily family;

  DeviceRope(const RopeRun& r, const RopeFamilyHost& fam)
      : run(r), qkv(to_device<T>(r.qkv)), positions(to_device_i32(r.positions)), slots(to_device_i32(r.slots)),
        inv_freq(to_device<float>(r.inv_freq)), bias(to_device<float>(fam.bias)), q_norm(to_device<float>(fam.q_norm)),
        k_norm(to_device<float>(fam.k_norm)), long_inv_freq(to_device<float>(fam.long_inv_freq)) {
    family.qkv_bias = bias.get();  // null when empty
    family.q_norm = q_norm.get();
    family.k_norm = k_norm.get();
    family.qk_norm_whole = fam.whole;
    family.norm_eps = fam.eps;
    family.long_inv_freq = long_inv_freq.get();
    family.long_from = fam.long_from;
    family.attention_factor = fam.factor;
    family.rotates = fam.rotates;
    family.rotary_half = fam.rotary_half;
    family.value_norm = fam.value_norm;
    family.stores_kv = fam.stores_kv;
  }
  template <typename KV>
  void run_into(DeviceBuffer<KV>& k, DeviceBuffer<KV>& v, const KvScales& scales = {}) {
    rope_kv_cache<T, KV>(qkv.get(), k.get(), v.get(), positions.get(), slots.get(), inv_freq.get(), run.num_rows(),
                         run.shape(), run.halves, nullptr, family, scales);
  }
};

template <typename T>
void check_rope_case(const RopeCase& rc, bool halves, const RopeFamilyHost& fam = {}) {
  const RopeRun run = make_rope_run<T>(rc, halves, fam);
  DeviceRope<T> rope(run, fam);
  DeviceBuffer<T> d_k(run.cache_elems());
  DeviceBuffer<T> d_v(run.cache_elems());
  poison(d_k);
  poison(d_v);
  rope.run_into(d_k, d_v);
  check_rope_outputs<T>(run, fam, to_host(rope.qkv), to_host(d_k), to_host(d_v));
}

// The FP8 cache write: q as with a cache in T, every written code within E4M3's rounding of the reference
// (the emulated test checks each code against fp8.hpp exactly), the other codes untouched.
template <typename T>
void check_rope_fp8_case(const RopeCase& rc, bool halves, const RopeFamilyHost& fam = {}) {
  const RopeRun run = make_rope_run<T>(rc, halves, fam);
  DeviceRope<T> rope(run, fam);
  const float k_scale = 0.0449f, v_scale = 0.0173f;
  const DeviceBuffer<float> d_scales = to_device<float>({k_scale, v_scale});
  DeviceBuffer<Fp8E4M3> d_k(run.cache_elems()), d_v(run.cache_elems());
  CUDA_CHECK(cudaMemset(d_k.get(), 0x7F, d_k.bytes()));  // E4M3 NaN
  CUDA_CHECK(cudaMemset(d_v.get(), 0x7F, d_v.bytes()));
  rope.run_into(d_k, d_v, KvScales{d_scales.get(), d_scales.get() + 1});
  DeviceRope<T> plain(run, fam);
  DeviceBuffer<T> d_k16(run.cache_elems()), d_v16(run.cache_elems());
  plain.run_into(d_k16, d_v16);
  CHECK(to_host(rope.qkv) == to_host(plain.qkv));
  std::vector<Fp8E4M3> k(run.cache_elems()), v(run.cache_elems());
  CUDA_CHECK(cudaMemcpy(k.data(), d_k.get(), d_k.bytes(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(v.data(), d_v.get(), d_v.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> k_written, v_written;
  std::vector<double> k_ref, v_ref;
  size_t stray = 0;
  for (size_t i = 0; i < run.cache_elems(); ++i) {
    if (std::isnan(run.cache.k[i])) {
      stray += (k[i] != 0x7F) + (v[i] != 0x7F);
      continue;
    }
    k_written.push_back(fp8_e4m3_to_float(k[i]) * k_scale);
    v_written.push_back(fp8_e4m3_to_float(v[i]) * v_scale);
    k_ref.push_back(run.cache.k[i]);
    v_ref.push_back(run.cache.v[i]);
  }
  CHECK(stray == 0);
  CHECK(k_written.size() == static_cast<size_t>(6 * run.kv_dim()));
  CHECK(rel_error(k_written, k_ref) < 0.05);  // E4M3 keeps 3 mantissa bits: a relative step of 2^-3
  CHECK(rel_error(v_written, v_ref) < 0.05);
}

}  // namespace

TEST_CASE_TEMPLATE("rope_kv_cache rotates q and k and fills the paged cache", T, float, __nv_bfloat16, __half) {
  for (const RopeCase& rc : rope_cases()) {
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
  for (const RopeCase& rc : rope_family_cases()) {
    for (const RopeFamilyHost& fam : rope_families(rc)) {
      for (bool halves : {false, true}) {
        CAPTURE(rc.head_dim);
        CAPTURE(halves);
        CAPTURE(fam.name);
        check_rope_case<T>(rc, halves, fam);
      }
    }
  }
}

TEST_CASE_TEMPLATE("rope_kv_cache writes an FP8 cache: E4M3 codes of value / scale", T, __nv_bfloat16, __half) {
  for (bool halves : {false, true}) {
    CAPTURE(halves);
    for (const RopeCase& rc : rope_cases()) {
      CAPTURE(rc.head_dim);
      check_rope_fp8_case<T>(rc, halves);
    }
    for (const RopeCase& rc : rope_family_cases()) {
      for (const RopeFamilyHost& fam : rope_families(rc)) {
        CAPTURE(fam.name);
        check_rope_fp8_case<T>(rc, halves, fam);
      }
    }
  }
}

}  // namespace cbatch::test
