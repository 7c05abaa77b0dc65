// The block code of the mixture-of-experts kernels (moe_block.cuh) and of the gated activation
// (swiglu_block.cuh) run on the CPU by the block emulator, against moe_case.hpp's references: routing under
// both rules with biases, ties and k = E, decision for decision (and weight for weight: the emulator's
// expf is the CPU's) the CPU's route_row, also with Gemma 4's logit and expert scales; the permutation entry
// for entry the CPU's group_by_expert; the gather; the clamped SwiGLU with expert biases; the un-permute
// with the weighted sum and the shared expert.
// The whole sparse layer as moe_ffn.cpp sequences it (the GEMMs on the host over the expert segments of the
// stacked weights, laid out as device_weights.cpp uploads them) against the CPU backend's moe_ffn.
// test_moe.cpp runs the same cases on the GPU. Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/elementwise/swiglu.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "tests/cuda/moe_case.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/moe/moe_block.cuh"
#include "cuda/elementwise/swiglu_block.cuh"

namespace cbatch::test {
namespace {

using namespace moe_detail;

void check_route_emulated(const RouteCase& rc) {
  const RouteInput in = make_route_input(rc, 100 + rc.num_experts + rc.top_k);
  std::vector<int32_t> want_experts;
  std::vector<float> want_weights;
  route_ref(rc, in, want_experts, want_weights);
  std::vector<int32_t> experts(want_experts.size(), -7);
  std::vector<float> weights(want_weights.size(), NAN);
  const RouteRule rule{rc.num_experts, rc.top_k, rc.renormalize, rc.router == MoeRouter::kTopkSoftmax};
  const unsigned blocks = static_cast<unsigned>((rc.num_rows + kRouteThreads - 1) / kRouteThreads);
  block_emulator::launch(blocks, kRouteThreads, [&] {
    moe_route_block(in.logits.data(), in.bias.empty() ? nullptr : in.bias.data(), rule, rc.num_rows, experts.data(),
                    weights.data());
  });
  CHECK(experts == want_experts);
  CHECK(weights == want_weights);
}

// Gemma 4's router: the logits times the scale (hidden^-1/2) before the choice, each pick's weight times its
// expert's scale after: the CPU's route_row on the scaled logits, then cpu_moe.cpp's expert-scale product.
void check_scaled_route_emulated(const RouteCase& rc) {
  const float logit_scale = 1.0f / std::sqrt(2816.0f);
  RouteInput in = make_route_input(rc, 300 + rc.num_experts + rc.top_k);
  RouteInput scaled = in;
  for (float& l : scaled.logits) l *= logit_scale;
  std::vector<float> expert_scale(static_cast<size_t>(rc.num_experts));
  for (int e = 0; e < rc.num_experts; ++e) {
    expert_scale[static_cast<size_t>(e)] = 0.5f + 0.093f * static_cast<float>(e % 11);
  }
  std::vector<int32_t> want_experts;
  std::vector<float> want_weights;
  route_ref(rc, scaled, want_experts, want_weights);
  for (size_t i = 0; i < want_weights.size(); ++i) {
    want_weights[i] *= expert_scale[static_cast<size_t>(want_experts[i])];
  }
  std::vector<int32_t> experts(want_experts.size(), -7);
  std::vector<float> weights(want_weights.size(), NAN);
  const RouteRule rule{rc.num_experts, rc.top_k, rc.renormalize, rc.router == MoeRouter::kTopkSoftmax, logit_scale,
                       expert_scale.data()};
  const unsigned blocks = static_cast<unsigned>((rc.num_rows + kRouteThreads - 1) / kRouteThreads);
  block_emulator::launch(blocks, kRouteThreads, [&] {
    moe_route_block(in.logits.data(), in.bias.empty() ? nullptr : in.bias.data(), rule, rc.num_rows, experts.data(),
                    weights.data());
  });
  CHECK(experts == want_experts);
  CHECK(weights == want_weights);
}

// The permutation of the routed picks (num_rows, top_k) against group_by_expert, and the inverse maps.
void check_permute_emulated(const std::vector<int32_t>& experts, int num_rows, int num_experts, int top_k) {
  const int num_picks = num_rows * top_k;
  const ExpertGroups want = group_by_expert(experts.data(), num_rows, MoeRouting{num_experts, top_k, false});
  std::vector<int32_t> offsets(static_cast<size_t>(num_experts) + 1, -7), entries(experts.size(), -7),
      pick_slot(experts.size(), -7), slot_expert(experts.size(), -7);
  block_emulator::launch(1, permute_threads(num_experts), [&] {
    moe_permute_block(experts.data(), num_picks, num_experts, offsets.data(), entries.data(), pick_slot.data(),
                      slot_expert.data());
  });
  CHECK(offsets == want.offsets);
  CHECK(entries == want.entries);
  size_t wrong = 0;
  for (int s = 0; s < num_picks; ++s) {
    wrong += pick_slot[static_cast<size_t>(entries[s])] != s;
    wrong += slot_expert[static_cast<size_t>(s)] != experts[static_cast<size_t>(entries[s])];
  }
  CHECK(wrong == 0);
}

template <typename T>
void check_combine_emulated(const CombineCase& cc) {
  CombineInput in = make_combine_input(cc, 7 + cc.dim);
  in.expert_out = round_to<T>(in.expert_out);
  in.shared_out = round_to<T>(in.shared_out);
  in.h = round_to<T>(in.h);
  const std::vector<double> want = combine_ref(cc, in);
  const std::vector<T> expert_out = to_t<T>(in.expert_out), shared_out = to_t<T>(in.shared_out), h = to_t<T>(in.h);
  SharedExpertOut<T> shared;
  if (cc.shared) shared = {shared_out.data(), h.data(), in.shared_gate.data()};
  std::vector<T> out(want.size(), from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(cc.num_rows), kRowThreads, [&] {
    moe_combine_block<T>(out.data(), expert_out.data(), in.pick_slot.data(), in.experts.data(), in.weights.data(),
                         cc.down_bias ? in.down_bias.data() : nullptr, shared, cc.top_k, cc.dim);
  });
  CHECK(rel_error(to_float_vector(out), want) < tolerance<T>());
}

// The gather of permuted rows, and the activation over them with the experts' gate|up biases.
template <typename T, Activation ACT>
void check_gather_and_activation_emulated() {
  const int num_rows = 11, top_k = 3, num_experts = 6, dim = 40, hidden = 24;
  const RouteCase rc{num_rows, num_experts, top_k, false, MoeRouter::kSoftmaxTopk, false, false};
  std::vector<int32_t> experts;
  std::vector<float> weights;
  route_ref(rc, make_route_input(rc, 5), experts, weights);
  const ExpertGroups g = group_by_expert(experts.data(), num_rows, MoeRouting{num_experts, top_k, false});
  const int num_picks = num_rows * top_k;
  const std::vector<T> h = to_t<T>(random_vector(static_cast<size_t>(num_rows) * dim, 3));
  std::vector<T> rows(static_cast<size_t>(num_picks) * dim, from_f32<T>(NAN));
  block_emulator::launch(static_cast<unsigned>(num_picks), kRowThreads,
                         [&] { moe_gather_block<T>(rows.data(), h.data(), g.entries.data(), top_k, dim); });
  size_t wrong = 0;
  for (int s = 0; s < num_picks; ++s) {
    for (int i = 0; i < dim; ++i) {
      const size_t src = static_cast<size_t>(g.entries[s] / top_k) * dim + i;
      wrong += to_f32(rows[static_cast<size_t>(s) * dim + i]) != to_f32(h[src]);
    }
  }
  CHECK(wrong == 0);

  std::vector<int32_t> slot_expert(static_cast<size_t>(num_picks));
  for (int s = 0; s < num_picks; ++s) slot_expert[s] = experts[static_cast<size_t>(g.entries[s])];
  const std::vector<float> gate_up =
      round_to<T>(random_vector(static_cast<size_t>(num_picks) * 2 * hidden, 4, -9.0f, 9.0f));
  const std::vector<float> bias = random_vector(static_cast<size_t>(num_experts) * 2 * hidden, 6, -2.0f, 2.0f);
  const GatedParams params{7.0f, 1.702f, bias.data(), slot_expert.data()};
  const std::vector<T> gate_up_t = to_t<T>(gate_up);
  std::vector<T> out(static_cast<size_t>(num_picks) * hidden, from_f32<T>(NAN));
  block_emulator::launch(1, 64, [&] {
    for (size_t i = threadIdx.x; i < out.size(); i += blockDim.x) {
      swiglu_detail::swiglu_element<T, ACT>(out.data(), gate_up_t.data(), i, hidden, params);
    }
  });
  std::vector<double> want(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t r = i / hidden, c = i % hidden;
    const float* b = &bias[static_cast<size_t>(slot_expert[r]) * 2 * hidden];
    const float gate = gate_up[r * 2 * hidden + c] + b[c], up = gate_up[r * 2 * hidden + hidden + c] + b[hidden + c];
    want[i] = gated_ref(gate, up, ACT, 7.0, 1.702);
  }
  CHECK(rel_error(to_float_vector(out), want) < tolerance<T>());
}


PackedMatrix pack(const std::vector<float>& w, int64_t n, int64_t k, ThreadPool& pool) {
  return PackedMatrix(n, k, [&](int64_t row, int64_t count, float* out) {
    std::memcpy(out, &w[static_cast<size_t>(row * k)], static_cast<size_t>(count * k) * sizeof(float));
  }, pool);
}

// moe_ffn.cpp's sequence in fp32 through the block code, each expert GEMM a host product over its segment
// of the stacked weights (gate_up (E, 2 width, dim): each expert's gate rows then up rows; down (E, dim,
// width)), against engine/cpu/cpu_moe's moe_ffn on the same weights. A shared expert scaled by its sigmoid
// gate, or (shared_gated false: Granite's) unscaled.
void check_sparse_layer_emulated(int num_rows, bool shared_expert, bool shared_gated = true) {
  const int dim = 48, width = 32, num_experts = 8, top_k = 2, shared_width = 40;
  std::mt19937 rng(17);
  auto floats = [&](size_t n, float scale) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  const std::vector<float> h = floats(static_cast<size_t>(num_rows) * dim, 1.0f);
  const std::vector<float> router = floats(static_cast<size_t>(num_experts) * dim, 1.0f);
  const std::vector<float> gate_up = floats(static_cast<size_t>(num_experts) * 2 * width * dim, 0.25f);
  const std::vector<float> down = floats(static_cast<size_t>(num_experts) * dim * width, 0.25f);
  const std::vector<float> shared_gate_up = floats(static_cast<size_t>(2 * shared_width) * dim, 0.25f);
  const std::vector<float> shared_down = floats(static_cast<size_t>(dim) * shared_width, 0.25f);
  const std::vector<float> shared_gate = floats(static_cast<size_t>(dim), 0.3f);

  ThreadPool pool(1);
  CpuLayer w;
  w.matrices[LayerTensor::kRouter] = pack(router, num_experts, dim, pool);
  for (int e = 0; e < num_experts; ++e) {
    const auto gu = gate_up.begin() + static_cast<long>(e) * 2 * width * dim;
    const auto dn = down.begin() + static_cast<long>(e) * dim * width;
    CpuExpert& expert = w.experts.emplace_back();
    expert.matrices[ExpertProduct::kGateUp] = pack(std::vector<float>(gu, gu + 2 * width * dim), 2 * width, dim, pool);
    expert.matrices[ExpertTensor::kDown] = pack(std::vector<float>(dn, dn + dim * width), dim, width, pool);
  }
  if (shared_expert) {
    w.matrices[LayerProduct::kSharedGateUp] = pack(shared_gate_up, 2 * shared_width, dim, pool);
    w.matrices[LayerTensor::kSharedDown] = pack(shared_down, dim, shared_width, pool);
    if (shared_gated) w.vectors[LayerTensor::kSharedExpertGate] = shared_gate;
  }
  const MoeRouting routing{num_experts, top_k, !shared_expert};
  MoeScratch scratch;
  std::vector<float> want(h.size());
  const int want_touched = moe_ffn(h.data(), num_rows, dim, w, routing, Activation::kSilu, pool, scratch, want.data());

  const int picks = num_rows * top_k;
  std::vector<float> logits(static_cast<size_t>(num_rows) * num_experts), weights(static_cast<size_t>(picks));
  matmul(h.data(), w.matrix(LayerTensor::kRouter), logits.data(), num_rows, pool);  // the CPU's logits: routing is compared exactly
  std::vector<int32_t> experts(static_cast<size_t>(picks)), offsets(num_experts + 1), entries(experts.size()),
      pick_slot(experts.size()), slot_expert(experts.size());
  block_emulator::launch(1, kRouteThreads, [&] {
    moe_route_block(logits.data(), nullptr, RouteRule{num_experts, top_k, routing.renormalize, false}, num_rows,
                    experts.data(), weights.data());
  });
  block_emulator::launch(1, permute_threads(num_experts), [&] {
    moe_permute_block(experts.data(), picks, num_experts, offsets.data(), entries.data(), pick_slot.data(),
                      slot_expert.data());
  });
  std::vector<float> rows(static_cast<size_t>(picks) * dim), gu_out(static_cast<size_t>(picks) * 2 * width),
      hidden(static_cast<size_t>(picks) * width);
  block_emulator::launch(static_cast<unsigned>(picks), kRowThreads,
                         [&] { moe_gather_block<float>(rows.data(), h.data(), entries.data(), top_k, dim); });
  int touched = 0;
  auto expert_gemm = [&](float* y, const float* x, const std::vector<float>& stacked, int n, int k) {
    for (int e = 0; e < num_experts; ++e) {
      const int m = offsets[e + 1] - offsets[e];
      if (m > 0) matmul_ref(x + static_cast<size_t>(offsets[e]) * k, &stacked[static_cast<size_t>(e) * n * k],
                            y + static_cast<size_t>(offsets[e]) * n, m, n, k);
    }
  };
  for (int e = 0; e < num_experts; ++e) touched += offsets[e + 1] > offsets[e];
  expert_gemm(gu_out.data(), rows.data(), gate_up, 2 * width, dim);
  for (size_t i = 0; i < hidden.size(); ++i) {
    swiglu_detail::swiglu_element<float, Activation::kSilu>(hidden.data(), gu_out.data(), i, width, GatedParams{});
  }
  expert_gemm(rows.data(), hidden.data(), down, dim, width);  // the experts' output over the gathered rows
  std::vector<float> s_gu, s_hidden, s_out;
  SharedExpertOut<float> shared;
  if (shared_expert) {
    s_gu.resize(static_cast<size_t>(num_rows) * 2 * shared_width);
    s_hidden.resize(static_cast<size_t>(num_rows) * shared_width);
    s_out.resize(h.size());
    matmul_ref(h.data(), shared_gate_up.data(), s_gu.data(), num_rows, 2 * shared_width, dim);
    for (size_t i = 0; i < s_hidden.size(); ++i) {
      swiglu_detail::swiglu_element<float, Activation::kSilu>(s_hidden.data(), s_gu.data(), i, shared_width,
                                                              GatedParams{});
    }
    matmul_ref(s_hidden.data(), shared_down.data(), s_out.data(), num_rows, dim, shared_width);
    shared = {s_out.data(), h.data(), shared_gated ? shared_gate.data() : nullptr};
  }
  std::vector<float> out(h.size(), NAN);
  block_emulator::launch(static_cast<unsigned>(num_rows), kRowThreads, [&] {
    moe_combine_block<float>(out.data(), rows.data(), pick_slot.data(), experts.data(), weights.data(), nullptr,
                             shared, top_k, dim);
  });
  CHECK(touched == want_touched);
  CHECK(rel_error(out, std::vector<double>(want.begin(), want.end())) < 1e-5);
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("moe routing's block code: the CPU's route_row decisions and weights, both rules, ties, k = E "
            "(emulated)") {
    for (const RouteCase& rc : route_cases()) {
      CAPTURE(rc.num_experts);
      CAPTURE(rc.top_k);
      CAPTURE(rc.ties);
      CAPTURE(static_cast<int>(rc.router));
      check_route_emulated(rc);
    }
  }

  TEST_CASE("moe routing's block code with Gemma 4's logit and expert scales: the CPU's choices and weights "
            "(emulated)") {
    for (const RouteCase& rc : route_cases()) {
      // Gemma 4's router has no bias (with one, the compiler may fuse logit * scale + bias into one rounding,
      // where the reference's scaled logits round twice).
      if (rc.has_bias) continue;
      CAPTURE(rc.num_experts);
      CAPTURE(rc.top_k);
      CAPTURE(rc.ties);
      CAPTURE(static_cast<int>(rc.router));
      check_scaled_route_emulated(rc);
    }
  }

  TEST_CASE("moe permutation's block code: group_by_expert's offsets and entries, stable in row order (emulated)") {
    for (const RouteCase& rc : route_cases()) {
      if (rc.router != MoeRouter::kSoftmaxTopk) continue;
      CAPTURE(rc.num_experts);
      CAPTURE(rc.top_k);
      CAPTURE(rc.ties);
      std::vector<int32_t> experts;
      std::vector<float> weights;
      route_ref(rc, make_route_input(rc, 9), experts, weights);
      check_permute_emulated(experts, rc.num_rows, rc.num_experts, rc.top_k);
    }
    // Many picks per warp, all on a few experts; one expert taking every pick; no picks at all.
    std::vector<int32_t> skewed(3000 * 8);
    for (size_t i = 0; i < skewed.size(); ++i) skewed[i] = static_cast<int32_t>((i * 7 + i / 13) % 3) * 40;
    check_permute_emulated(skewed, 3000, 128, 8);
    // 512 experts (16 warps share the counters), picks on both sides of expert 256.
    std::vector<int32_t> wide(1500 * 10);
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<int32_t>((i * 37 + i / 7) % 512);
    check_permute_emulated(wide, 1500, 512, 10);
    check_permute_emulated(std::vector<int32_t>(67 * 2, 5), 67, 8, 2);
    check_permute_emulated({}, 0, 8, 2);
  }

  TEST_CASE_TEMPLATE("moe gather and the gated activation with expert biases (clamped SwiGLU, SwiGLU) (emulated)", T,
                     float, __nv_bfloat16, __half) {
    check_gather_and_activation_emulated<T, Activation::kSwigluClamped>();
    check_gather_and_activation_emulated<T, Activation::kSilu>();
  }

  TEST_CASE("moe: a whole sparse layer through the block code, as moe_ffn.cpp sequences it, equals the CPU's "
            "moe_ffn (emulated)") {
    for (int num_rows : {1, 13}) {
      CAPTURE(num_rows);
      check_sparse_layer_emulated(num_rows, false);
      check_sparse_layer_emulated(num_rows, true);
      check_sparse_layer_emulated(num_rows, true, false);  // Granite's shared MLP: no gate
    }
  }

  TEST_CASE_TEMPLATE("moe combine's block code: un-permute, weighted sum in k order, down biases, shared expert "
                     "(emulated)", T, float, __nv_bfloat16, __half) {
    for (const CombineCase& cc : combine_cases()) {
      CAPTURE(cc.dim);
      check_combine_emulated<T>(cc);
    }
  }
}

}  // namespace cbatch::test
