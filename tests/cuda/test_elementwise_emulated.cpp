// The block code of RoPE with the cache write (rope_kv_cache_block.cuh) and of RMSNorm with the residual
// add (rmsnorm_block.cuh) run on the CPU by the block emulator, Llama's builds and the family builds: RoPE
// with biases, q/k head norms (a warp per head, shared memory), the longrope table and the attention
// factor on rope_case.hpp's cases (test_rope_kv_cache.cpp runs the same on the GPU), and its FP8 cache
// write code by code against fp8.hpp; RMSNorm with and without a sandwich norm of the delta, in place and
// gathered, with a bias added to the delta (gpt-oss's o bias) and with the delta scaled (Granite), against
// reference.hpp's rmsnorm_ref; relu^2's element against the CPU's.
// The device helpers (cuda_dtype.cuh) are compiled as host code after the emulator. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/attention/rope_kv_cache.hpp"
#include "cuda/elementwise/swiglu.hpp"
#include "engine/cpu/cpu_ops.hpp"
#include "engine/model/fp8.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/rope_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it (where threadIdx.x is
// unsigned, as on a GPU, and compared with ints).
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/elementwise/rmsnorm_block.cuh"
#include "cuda/elementwise/swiglu_block.cuh"
#include "cuda/attention/rope_kv_cache_block.cuh"

namespace cbatch::test {
namespace {

const float* data_or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

RopeFamily rope_family(const RopeFamilyHost& fam) {
  RopeFamily family;
  family.qkv_bias = data_or_null(fam.bias);
  family.q_norm = data_or_null(fam.q_norm);
  family.k_norm = data_or_null(fam.k_norm);
  family.qk_norm_whole = fam.whole;
  family.norm_eps = fam.eps;
  family.long_inv_freq = data_or_null(fam.long_inv_freq);
  family.long_from = fam.long_from;
  family.attention_factor = fam.factor;
  family.rotates = fam.rotates;
  family.rotary_half = fam.rotary_half;
  family.value_norm = fam.value_norm;
  family.stores_kv = fam.stores_kv;
  return family;
}

// The block code of the FAMILY build on the run's rows (every row a block of kRopeThreads) into caches of KV,
// with qkv in T (rotated in place).
template <typename T, bool FAMILY, typename KV>
void run_rope_emulated(const RopeRun& run, const RopeFamilyHost& fam, std::vector<T>& qkv, std::vector<KV>& k,
                       std::vector<KV>& v, const KvScales& scales = {}, int cache_heads = 0) {
  const RopeCase& rc = run.rc;
  const RopeFamily family = rope_family(fam);
  REQUIRE(family.is_plain() == !FAMILY);
  std::vector<float> s_inv_rms(static_cast<size_t>(rc.num_heads + 2 * rc.num_kv_heads), NAN);
  block_emulator::launch(static_cast<unsigned>(run.num_rows()), rope_detail::kRopeThreads, [&] {
    rope_detail::rope_kv_cache_block<T, FAMILY, KV>(qkv.data(), k.data(), v.data(), run.positions.data(),
                                                    run.slots.data(), run.inv_freq.data(), rc.num_heads,
                                                    rc.num_kv_heads, rc.head_dim, RopeRun::kBlockSize, run.halves,
                                                    family, s_inv_rms.data(), scales, cache_heads);
  });
}

// A layer narrower than its cache slot (Gemma 4: cache_heads heads' room a block, num_kv_heads used): the
// writes land where the compact layout's do, block by block at the wider stride, and the heads past the
// layer's keep their poison; q is the compact run's.
template <typename T>
void check_rope_cache_heads(const RopeCase& rc, int cache_heads, const RopeFamilyHost& fam) {
  const RopeRun run = make_rope_run<T>(rc, false, fam);
  std::vector<T> qkv = to_t<T>(run.qkv), qkv_wide = qkv;
  std::vector<T> k(run.cache_elems(), from_f32<T>(NAN)), v = k;
  run_rope_emulated<T, true>(run, fam, qkv, k, v);
  const size_t wide_elems = run.cache_elems() / rc.num_kv_heads * cache_heads;
  std::vector<T> k_wide(wide_elems, from_f32<T>(NAN)), v_wide = k_wide;
  run_rope_emulated<T, true>(run, fam, qkv_wide, k_wide, v_wide, {}, cache_heads);
  CHECK(to_float_vector(qkv_wide) == to_float_vector(qkv));
  const size_t per_head = static_cast<size_t>(RopeRun::kBlockSize) * rc.head_dim;  // one head of one block
  size_t wrong = 0, written = 0;
  for (int b = 0; b < RopeRun::kNumBlocks; ++b) {
    for (int h = 0; h < cache_heads; ++h) {
      for (size_t i = 0; i < per_head; ++i) {
        const size_t at = (static_cast<size_t>(b) * cache_heads + h) * per_head + i;
        const float kw = to_f32(k_wide[at]), vw = to_f32(v_wide[at]);
        if (h >= rc.num_kv_heads) {
          wrong += !std::isnan(kw) + !std::isnan(vw);
          continue;
        }
        const size_t compact = (static_cast<size_t>(b) * rc.num_kv_heads + h) * per_head + i;
        const float kc = to_f32(k[compact]), vc = to_f32(v[compact]);
        wrong += !(kw == kc || (std::isnan(kw) && std::isnan(kc))) + !(vw == vc || (std::isnan(vw) && std::isnan(vc)));
        written += !std::isnan(kc);
      }
    }
  }
  CHECK(wrong == 0);
  CHECK(written > 0);
}

// One RoPE case through the block code of the FAMILY build.
template <typename T, bool FAMILY>
void check_rope_emulated(const RopeCase& rc, bool halves, const RopeFamilyHost& fam = {}) {
  const RopeRun run = make_rope_run<T>(rc, halves, fam);
  std::vector<T> qkv = to_t<T>(run.qkv);
  std::vector<T> k(run.cache_elems(), from_f32<T>(NAN)), v(run.cache_elems(), from_f32<T>(NAN));
  run_rope_emulated<T, FAMILY>(run, fam, qkv, k, v);
  check_rope_outputs<T>(run, fam, to_float_vector(qkv), to_float_vector(k), to_float_vector(v));
}

// The FP8 cache write: the build into an fp32 cache gives every value before its rounding (and is checked
// against the reference); the FP8 build's q equals it, each written code is fp8_e4m3_from_float(value /
// scale), and every other code keeps its poison (0x7F, NaN).
template <typename T, bool FAMILY>
void check_rope_fp8_emulated(const RopeCase& rc, bool halves, const RopeFamilyHost& fam = {}) {
  const RopeRun run = make_rope_run<T>(rc, halves, fam);
  std::vector<T> qkv32 = to_t<T>(run.qkv), qkv8 = qkv32;
  std::vector<float> k32(run.cache_elems(), NAN), v32(run.cache_elems(), NAN);
  run_rope_emulated<T, FAMILY>(run, fam, qkv32, k32, v32);
  check_rope_outputs<T>(run, fam, to_float_vector(qkv32), k32, v32);
  const float k_scale = 0.0449f, v_scale = 0.0173f;  // not powers of two: a lost scale changes codes
  std::vector<Fp8E4M3> k8(run.cache_elems(), 0x7F), v8(run.cache_elems(), 0x7F);
  run_rope_emulated<T, FAMILY>(run, fam, qkv8, k8, v8, KvScales{&k_scale, &v_scale});
  CHECK(to_float_vector(qkv8) == to_float_vector(qkv32));
  size_t wrong = 0;
  for (size_t i = 0; i < run.cache_elems(); ++i) {
    const uint8_t k_want = std::isnan(k32[i]) ? 0x7F : fp8_e4m3_from_float(k32[i] / k_scale);
    const uint8_t v_want = std::isnan(v32[i]) ? 0x7F : fp8_e4m3_from_float(v32[i] / v_scale);
    wrong += (k8[i] != k_want) + (v8[i] != v_want);
  }
  CHECK(wrong == 0);
}

// rmsnorm_residual (in place) and rmsnorm_gather (rows picked, x untouched) of the POST_NORM build.
template <typename T, bool POST_NORM>
void check_rmsnorm_emulated(int rows, int dim) {
  const float eps = 1e-6f;
  const size_t n = static_cast<size_t>(rows) * dim;
  const std::vector<float> x = random_vector(n, 11 + dim, -2.0f, 2.0f);
  const std::vector<float> delta = round_to<T>(random_vector(n, 12 + dim, -30.0f, 30.0f));
  const std::vector<float> w = random_vector(static_cast<size_t>(dim), 13, 0.5f, 1.5f);
  const std::vector<float> post = POST_NORM ? random_vector(static_cast<size_t>(dim), 14, 0.5f, 2.5f)
                                            : std::vector<float>{};
  std::vector<double> x_ref, out_ref;
  rmsnorm_ref(x, delta, w, rows, dim, eps, x_ref, out_ref, post);
  const std::vector<T> delta_t = to_t<T>(delta);

  std::vector<float> x_dev = x;
  std::vector<T> out(n, from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(rows), rmsnorm_detail::kRmsnormThreads, [&] {
    rmsnorm_detail::rmsnorm_residual_block<T, POST_NORM>(out.data(), x_dev.data(), delta_t.data(), w.data(), nullptr,
                                                         dim, eps, data_or_null(post));
  });
  if (POST_NORM) {
    CHECK(rel_error(x_dev, x_ref) < 1e-6);  // fp32 arithmetic throughout
  } else {
    CHECK(rel_error(x_dev, x_ref) == 0.0);  // one fp32 add, as the reference
  }
  CHECK(rel_error(to_float_vector(out), out_ref) < tolerance<T>());

  const std::vector<int32_t> picked = {rows - 1, 0, rows / 2};
  std::vector<float> x_gather = x;
  std::vector<T> gathered(picked.size() * dim, from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(picked.size()), rmsnorm_detail::kRmsnormThreads, [&] {
    rmsnorm_detail::rmsnorm_residual_block<T, POST_NORM>(gathered.data(), x_gather.data(), delta_t.data(), w.data(),
                                                         picked.data(), dim, eps, data_or_null(post));
  });
  std::vector<double> picked_ref;
  for (int r : picked) {
    picked_ref.insert(picked_ref.end(), out_ref.begin() + static_cast<long>(r) * dim,
                      out_ref.begin() + static_cast<long>(r + 1) * dim);
  }
  CHECK(rel_error(to_float_vector(gathered), picked_ref) < tolerance<T>());
  CHECK(x_gather == x);
}

// rmsnorm_residual with a delta bias (gpt-oss's o bias): the reference on delta + bias, added in fp32.
template <typename T, bool POST_NORM>
void check_rmsnorm_bias_emulated(int rows, int dim) {
  const float eps = 1e-6f;
  const size_t n = static_cast<size_t>(rows) * dim;
  const std::vector<float> x = random_vector(n, 21 + dim, -2.0f, 2.0f);
  const std::vector<float> delta = round_to<T>(random_vector(n, 22 + dim, -3.0f, 3.0f));
  const std::vector<float> bias = random_vector(static_cast<size_t>(dim), 23, -20.0f, 20.0f);
  const std::vector<float> w = random_vector(static_cast<size_t>(dim), 24, 0.5f, 1.5f);
  const std::vector<float> post = POST_NORM ? random_vector(static_cast<size_t>(dim), 25, 0.5f, 2.5f)
                                            : std::vector<float>{};
  std::vector<float> biased(n);
  for (size_t i = 0; i < n; ++i) biased[i] = delta[i] + bias[i % static_cast<size_t>(dim)];
  std::vector<double> x_ref, out_ref;
  rmsnorm_ref(x, biased, w, rows, dim, eps, x_ref, out_ref, post);
  const std::vector<T> delta_t = to_t<T>(delta);
  std::vector<float> x_dev = x;
  std::vector<T> out(n, from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(rows), rmsnorm_detail::kRmsnormThreads, [&] {
    rmsnorm_detail::rmsnorm_residual_block<T, POST_NORM>(out.data(), x_dev.data(), delta_t.data(), w.data(), nullptr,
                                                         dim, eps, data_or_null(post), bias.data());
  });
  CHECK(rel_error(x_dev, x_ref) < 1e-6);
  CHECK(rel_error(to_float_vector(out), out_ref) < tolerance<T>());
}

// rmsnorm_residual and rmsnorm_gather with a delta scale (Granite's residual multiplier): x += scale * delta,
// the reference on the scaled delta (the same fp32 product the CPU adds).
template <typename T>
void check_rmsnorm_scale_emulated(int rows, int dim) {
  const float eps = 1e-6f, scale = 0.22f;
  const size_t n = static_cast<size_t>(rows) * dim;
  const std::vector<float> x = random_vector(n, 31 + dim, -2.0f, 2.0f);
  const std::vector<float> delta = round_to<T>(random_vector(n, 32 + dim, -3.0f, 3.0f));
  const std::vector<float> w = random_vector(static_cast<size_t>(dim), 33, 0.5f, 1.5f);
  std::vector<float> scaled(n);
  for (size_t i = 0; i < n; ++i) scaled[i] = scale * delta[i];
  std::vector<double> x_ref, out_ref;
  rmsnorm_ref(x, scaled, w, rows, dim, eps, x_ref, out_ref, {});
  const std::vector<T> delta_t = to_t<T>(delta);
  std::vector<float> x_dev = x;
  std::vector<T> out(n, from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(rows), rmsnorm_detail::kRmsnormThreads, [&] {
    rmsnorm_detail::rmsnorm_residual_block<T, false>(out.data(), x_dev.data(), delta_t.data(), w.data(), nullptr, dim,
                                                     eps, nullptr, nullptr, scale);
  });
  CHECK(rel_error(x_dev, x_ref) < 1e-6);  // fp32; the product and add may be fused into one FMA
  CHECK(rel_error(to_float_vector(out), out_ref) < tolerance<T>());
  const std::vector<int32_t> picked = {rows - 1, 0};
  std::vector<float> x_gather = x;
  std::vector<T> gathered(picked.size() * dim, from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(picked.size()), rmsnorm_detail::kRmsnormThreads, [&] {
    rmsnorm_detail::rmsnorm_residual_block<T, false>(gathered.data(), x_gather.data(), delta_t.data(), w.data(),
                                                     picked.data(), dim, eps, nullptr, nullptr, scale);
  });
  std::vector<double> picked_ref;
  for (int r : picked) {
    picked_ref.insert(picked_ref.end(), out_ref.begin() + static_cast<long>(r) * dim,
                      out_ref.begin() + static_cast<long>(r + 1) * dim);
  }
  CHECK(rel_error(to_float_vector(gathered), picked_ref) < tolerance<T>());
}

// f(case, halves, nullptr) for Llama's RoPE cases and f(case, halves, &family) for each family of the family
// cases, with both rotation layouts.
template <class F>
void for_each_rope_case(F&& f) {
  for (bool halves : {false, true}) {
    CAPTURE(halves);
    for (const RopeCase& rc : rope_cases()) {
      CAPTURE(rc.head_dim);
      f(rc, halves, nullptr);
    }
    for (const RopeCase& rc : rope_family_cases()) {
      CAPTURE(rc.head_dim);
      for (const RopeFamilyHost& fam : rope_families(rc)) {
        CAPTURE(fam.name);
        f(rc, halves, &fam);
      }
    }
  }
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE_TEMPLATE("rope_kv_cache's block code, Llama's and the family build (emulated)", T, float, __nv_bfloat16,
                     __half) {
    for_each_rope_case([](const RopeCase& rc, bool halves, const RopeFamilyHost* fam) {
      if (fam == nullptr) return check_rope_emulated<T, false>(rc, halves);
      check_rope_emulated<T, true>(rc, halves, *fam);
    });
  }

  TEST_CASE_TEMPLATE("rope_kv_cache's block code into a cache slot wider than the layer: Gemma 4's global layer "
                     "of head 512 and its sliding layer of 256 (emulated)", T, float, __nv_bfloat16) {
    for (const RopeCase& rc : {RopeCase{16, 2, 512, false}, RopeCase{8, 1, 256, false}}) {
      CAPTURE(rc.head_dim);
      for (const RopeFamilyHost& fam : rope_families(rc)) {
        if (!fam.value_norm || !fam.stores_kv) continue;  // Gemma 4's layers that write K/V
        CAPTURE(fam.name);
        check_rope_cache_heads<T>(rc, rc.head_dim == 512 ? 4 : 2, fam);  // 31B's global, E2B's sliding
      }
    }
  }

  TEST_CASE_TEMPLATE("rope_kv_cache's block code into an FP8 cache: every code as fp8.hpp rounds value / scale "
                     "(emulated)", T, __nv_bfloat16, __half) {
    for_each_rope_case([](const RopeCase& rc, bool halves, const RopeFamilyHost* fam) {
      if (fam == nullptr) return check_rope_fp8_emulated<T, false>(rc, halves);
      check_rope_fp8_emulated<T, true>(rc, halves, *fam);
    });
  }

  TEST_CASE_TEMPLATE("rmsnorm's block code with and without a sandwich norm, in place and gathered (emulated)", T,
                     float, __nv_bfloat16, __half) {
    for (int rows : {1, 5}) {
      for (int dim : {172, 2560}) {
        CAPTURE(rows);
        CAPTURE(dim);
        check_rmsnorm_emulated<T, false>(rows, dim);
        check_rmsnorm_emulated<T, true>(rows, dim);
        check_rmsnorm_bias_emulated<T, false>(rows, dim);
        check_rmsnorm_bias_emulated<T, true>(rows, dim);
        check_rmsnorm_scale_emulated<T>(rows, dim);
      }
    }
  }

  TEST_CASE("relu^2's element (Nemotron-H's plain FFN) equals the CPU's plain_ffn_row (emulated)") {
    const std::vector<float> up = random_vector(1000, 41, -8.0f, 8.0f);
    std::vector<float> want(up.size());
    plain_ffn_row(up.data(), nullptr, want.data(), static_cast<int>(up.size()), Activation::kRelu2);
    size_t wrong = 0;
    for (size_t i = 0; i < up.size(); ++i) wrong += swiglu_detail::relu_squared_f(up[i]) != want[i];
    CHECK(wrong == 0);
  }
}

}  // namespace cbatch::test
