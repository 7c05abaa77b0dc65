// rope_kv_cache against the CPU reference (rope_case.hpp): q rotated in place, k rotated and v copied into
// the paged cache at each row's slot, nothing stored for slot -1 and no other cache element touched; and
// its family build: q/k/v biases, q/k head norms, the longrope table from a position on, the attention
// factor. test_elementwise_emulated.cpp runs the kernel's block code on the same cases without a GPU.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "cuda/rope_kv_cache.hpp"
#include "tests/cuda/rope_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

namespace {

template <typename T>
void check_rope_case(const RopeCase& rc, bool halves, const RopeFamilyHost& fam = {}) {
  const RopeRun run = make_rope_run<T>(rc, halves, fam);
  auto d_qkv = to_device<T>(run.qkv);
  auto d_positions = to_device_i32(run.positions);
  auto d_slots = to_device_i32(run.slots);
  auto d_inv_freq = to_device<float>(run.inv_freq);
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
  DeviceBuffer<T> d_k(run.cache_elems());
  DeviceBuffer<T> d_v(run.cache_elems());
  poison(d_k);
  poison(d_v);
  rope_kv_cache<T>(d_qkv.get(), d_k.get(), d_v.get(), d_positions.get(), d_slots.get(), d_inv_freq.get(),
                   run.num_rows(), run.shape(), halves, nullptr, family);
  check_rope_outputs<T>(run, fam, to_host(d_qkv), to_host(d_k), to_host(d_v));
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

}  // namespace cbatch::test
