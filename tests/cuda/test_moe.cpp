// The mixture-of-experts launchers (moe.hpp, moe_gemm.hpp, swiglu.hpp's expert build) on the GPU against
// moe_case.hpp's CPU references, the cases test_moe_emulated.cpp runs through the block emulator: routing
// (decisions exactly the CPU's route_row; weights within a few ulps, the GPU's expf differing), the
// permutation (exactly group_by_expert), gather, clamped SwiGLU with expert biases, the grouped expert GEMMs
// (grouped and per-segment, with experts no row picked left untouched), and the combine. Outputs poisoned.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/cuda_context.hpp"
#include "cuda/moe.hpp"
#include "cuda/moe_gemm.hpp"
#include "cuda/swiglu.hpp"
#include "tests/cuda/moe_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

std::vector<int32_t> to_host_i32(const DeviceBuffer<int32_t>& d) {
  std::vector<int32_t> v(d.size());
  if (!v.empty()) CUDA_CHECK(cudaMemcpy(v.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

TEST_CASE("moe_route: the CPU's route_row decisions under both rules, ties and k = E") {
  for (const RouteCase& rc : route_cases()) {
    CAPTURE(rc.num_experts);
    CAPTURE(rc.top_k);
    CAPTURE(rc.ties);
    CAPTURE(static_cast<int>(rc.router));
    const RouteInput in = make_route_input(rc, 100 + rc.num_experts + rc.top_k);
    std::vector<int32_t> want_experts;
    std::vector<float> want_weights;
    route_ref(rc, in, want_experts, want_weights);
    auto d_logits = to_device<float>(in.logits);
    DeviceBuffer<float> d_bias = in.bias.empty() ? DeviceBuffer<float>() : to_device<float>(in.bias);
    DeviceBuffer<int32_t> d_experts(want_experts.size());
    DeviceBuffer<float> d_weights(want_weights.size());
    poison(d_weights);
    moe_route(d_experts.get(), d_weights.get(), d_logits.get(), d_bias.get(), rc.num_rows,
              MoeRouteRule{rc.num_experts, rc.top_k, rc.renormalize, rc.router}, nullptr);
    CHECK(to_host_i32(d_experts) == want_experts);
    const std::vector<float> weights = to_host(d_weights);
    double worst = 0.0;
    for (size_t i = 0; i < weights.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(weights[i]) - want_weights[i]));
    }
    CHECK(worst < 1e-6);
  }
}

TEST_CASE("moe_permute: group_by_expert's offsets and entries, and the inverse maps") {
  for (const auto& [num_rows, num_experts, top_k] : {std::tuple{1, 8, 2}, std::tuple{37, 60, 4},
                                                     std::tuple{3000, 128, 8}, std::tuple{9, 6, 6}}) {
    CAPTURE(num_rows);
    CAPTURE(num_experts);
    const RouteCase rc{num_rows, num_experts, top_k, true, MoeRouter::kSoftmaxTopk, true, false};
    std::vector<int32_t> experts;
    std::vector<float> weights;
    route_ref(rc, make_route_input(rc, 9), experts, weights);
    const ExpertGroups want = group_by_expert(experts.data(), num_rows, MoeRouting{num_experts, top_k, true});
    auto d_experts = to_device_i32(experts);
    DeviceBuffer<int32_t> d_offsets(static_cast<size_t>(num_experts) + 1), d_entries(experts.size()),
        d_pick_slot(experts.size()), d_slot_expert(experts.size());
    moe_permute(d_offsets.get(), d_entries.get(), d_pick_slot.get(), d_slot_expert.get(), d_experts.get(),
                static_cast<int>(experts.size()), num_experts, nullptr);
    CHECK(to_host_i32(d_offsets) == want.offsets);
    const std::vector<int32_t> entries = to_host_i32(d_entries);
    CHECK(entries == want.entries);
    const std::vector<int32_t> pick_slot = to_host_i32(d_pick_slot), slot_expert = to_host_i32(d_slot_expert);
    size_t wrong = 0;
    for (size_t s = 0; s < entries.size(); ++s) {
      wrong += pick_slot[static_cast<size_t>(entries[s])] != static_cast<int32_t>(s);
      wrong += slot_expert[s] != experts[static_cast<size_t>(entries[s])];
    }
    CHECK(wrong == 0);
  }
}

// The expert products of a routed batch, grouped (where cuBLAS has it) and per segment, against a host
// product per pick; a poisoned expert no row picked must stay unread (its NaNs would show).
TEST_CASE_TEMPLATE("moe gather, the grouped expert GEMMs and the clamped SwiGLU with expert biases", T, float,
                   __nv_bfloat16, __half) {
  const CudaContext context(0);
  const int num_rows = 21, num_experts = 8, top_k = 2, dim = 64, width = 48;
  const RouteCase rc{num_rows, num_experts, top_k, true, MoeRouter::kSoftmaxTopk, false, false};
  RouteInput in = make_route_input(rc, 21);
  for (int r = 0; r < num_rows; ++r) in.logits[static_cast<size_t>(r) * num_experts + 3] = -100.0f;  // 3: never
  std::vector<int32_t> experts;
  std::vector<float> weights;
  route_ref(rc, in, experts, weights);
  const ExpertGroups g = group_by_expert(experts.data(), num_rows, MoeRouting{num_experts, top_k, true});
  const int picks = num_rows * top_k;
  const std::vector<float> h = round_to<T>(random_vector(static_cast<size_t>(num_rows) * dim, 1));
  std::vector<float> w = round_to<T>(random_vector(static_cast<size_t>(num_experts) * 2 * width * dim, 2, -0.3f, 0.3f));
  for (size_t i = 3 * 2 * width * dim; i < 4 * static_cast<size_t>(2 * width * dim); ++i) w[i] = NAN;
  const std::vector<float> bias = random_vector(static_cast<size_t>(num_experts) * 2 * width, 3);
  auto d_h = to_device<T>(h);
  auto d_w = to_device<T>(w);
  auto d_bias = to_device<float>(bias);
  auto d_entries = to_device_i32(g.entries);
  std::vector<int32_t> slot_expert(static_cast<size_t>(picks));
  for (int s = 0; s < picks; ++s) slot_expert[s] = experts[static_cast<size_t>(g.entries[s])];
  auto d_slot_expert = to_device_i32(slot_expert);
  DeviceBuffer<T> d_rows(static_cast<size_t>(picks) * dim), d_gate_up(static_cast<size_t>(picks) * 2 * width),
      d_hidden(static_cast<size_t>(picks) * width);
  for (const char* mode : {"grouped", "loop"}) {
    CAPTURE(mode);
    if (std::string(mode) == "loop") setenv("CBATCH_MOE_GEMM", "loop", 1);
    ExpertGemm<T> gemm(num_experts);
    unsetenv("CBATCH_MOE_GEMM");
    poison(d_rows);
    poison(d_hidden);
    moe_gather<T>(d_rows.get(), d_h.get(), d_entries.get(), picks, top_k, dim, context.stream());
    gemm.run(context.cublas(), context.stream(), g.offsets.data(), d_gate_up.get(), d_rows.get(), d_w.get(), 2 * width,
             dim, 0);
    swiglu<T>(d_hidden.get(), d_gate_up.get(), picks, width, context.stream(), Activation::kSwigluClamped,
              GatedParams{7.0f, 1.702f, d_bias.get(), d_slot_expert.get()});
    CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    std::vector<double> want;
    for (int s = 0; s < picks; ++s) {
      const int e = slot_expert[s];
      const float* x = &h[static_cast<size_t>(g.entries[s] / top_k) * dim];
      const float* we = &w[static_cast<size_t>(e) * 2 * width * dim];
      for (int c = 0; c < width; ++c) {
        const float* b = &bias[static_cast<size_t>(e) * 2 * width];
        double gate = b[c], up = b[width + c];
        for (int i = 0; i < dim; ++i) {
          gate += static_cast<double>(we[static_cast<size_t>(c) * dim + i]) * x[i];
          up += static_cast<double>(we[static_cast<size_t>(width + c) * dim + i]) * x[i];
        }
        want.push_back(gated_ref(gate, up, Activation::kSwigluClamped, 7.0, 1.702));
      }
    }
    CHECK(rel_error(to_host(d_hidden), want) < 3 * tolerance<T>());
  }
}

TEST_CASE_TEMPLATE("moe_combine: un-permute and weighted sum in k order, down biases, shared expert", T, float,
                   __nv_bfloat16, __half) {
  for (const CombineCase& cc : combine_cases()) {
    CAPTURE(cc.dim);
    CombineInput in = make_combine_input(cc, 7 + cc.dim);
    in.expert_out = round_to<T>(in.expert_out);
    in.shared_out = round_to<T>(in.shared_out);
    in.h = round_to<T>(in.h);
    const std::vector<double> want = combine_ref(cc, in);
    auto d_expert_out = to_device<T>(in.expert_out);
    auto d_pick_slot = to_device_i32(in.pick_slot);
    auto d_experts = to_device_i32(in.experts);
    auto d_weights = to_device<float>(in.weights);
    DeviceBuffer<float> d_down_bias = cc.down_bias ? to_device<float>(in.down_bias) : DeviceBuffer<float>();
    DeviceBuffer<T> d_shared_out, d_h;
    DeviceBuffer<float> d_gate;
    MoeShared<T> shared;
    if (cc.shared) {
      d_shared_out = to_device<T>(in.shared_out);
      d_h = to_device<T>(in.h);
      d_gate = to_device<float>(in.shared_gate);
      shared = MoeShared<T>{d_shared_out.get(), d_h.get(), d_gate.get()};
    }
    DeviceBuffer<T> d_out(want.size());
    poison(d_out);
    moe_combine<T>(d_out.get(), d_expert_out.get(), d_pick_slot.get(), d_experts.get(), d_weights.get(),
                   d_down_bias.get(), shared, cc.num_rows, cc.top_k, cc.dim, nullptr);
    CHECK(rel_error(to_host(d_out), want) < tolerance<T>());
  }
}

}  // namespace cbatch::test
