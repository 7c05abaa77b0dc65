// Inputs and CPU references of the mixture-of-experts kernel tests, shared by the emulated block code
// (test_moe_emulated.cpp) and the GPU launchers (test_moe.cpp). Routing and grouping are engine/cpu/
// cpu_moe's own route_row (both rules) and group_by_expert; the activation and the combine are written out
// in double.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/cpu/cpu_moe.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch::test {

struct RouteCase {
  int num_rows, num_experts, top_k;
  bool renormalize;
  MoeRouter router;
  bool ties;       // logits drawn from 4 values, so most rows hold ties, some at the k-th place
  bool has_bias;
};

inline std::vector<RouteCase> route_cases() {
  std::vector<RouteCase> cases;
  for (MoeRouter router : {MoeRouter::kSoftmaxTopk, MoeRouter::kTopkSoftmax}) {
    for (bool ties : {false, true}) {
      cases.push_back({37, 8, 2, true, router, ties, false});
      cases.push_back({37, 8, 2, false, router, ties, true});
      cases.push_back({70, 60, 4, false, router, ties, false});
      cases.push_back({300, 128, 8, true, router, ties, true});
      cases.push_back({9, 6, 6, true, router, ties, false});    // k = E
      cases.push_back({9, 5, 5, false, router, ties, true});    // k = E
      cases.push_back({3, 256, 1, false, router, ties, false});
      cases.push_back({40, 512, 10, true, router, ties, true});  // 512 experts (Qwen3-Next's), top 10
    }
  }
  return cases;
}

struct RouteInput {
  std::vector<float> logits;  // (num_rows, num_experts)
  std::vector<float> bias;    // (num_experts) or empty
};

inline RouteInput make_route_input(const RouteCase& rc, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::uniform_int_distribution<int> pick(0, 3);
  RouteInput in;
  in.logits.resize(static_cast<size_t>(rc.num_rows) * rc.num_experts);
  for (float& l : in.logits) l = rc.ties ? 0.5f * static_cast<float>(pick(rng)) : u(rng);
  if (rc.has_bias) {
    in.bias.resize(static_cast<size_t>(rc.num_experts));
    for (float& b : in.bias) b = rc.ties ? 0.25f * static_cast<float>(pick(rng) % 2) : 0.5f * u(rng);
  }
  return in;
}

// The CPU's picks of every row: route_row on logits + bias (the router product's bias is part of the
// logits).
inline void route_ref(const RouteCase& rc, const RouteInput& in, std::vector<int32_t>& experts,
                      std::vector<float>& weights) {
  const MoeRouting routing{rc.num_experts, rc.top_k, rc.renormalize, rc.router};
  experts.assign(static_cast<size_t>(rc.num_rows) * rc.top_k, -1);
  weights.assign(experts.size(), NAN);
  std::vector<float> row(static_cast<size_t>(rc.num_experts));
  for (int r = 0; r < rc.num_rows; ++r) {
    for (int e = 0; e < rc.num_experts; ++e) {
      row[e] = in.logits[static_cast<size_t>(r) * rc.num_experts + e] + (in.bias.empty() ? 0.0f : in.bias[e]);
    }
    int32_t* ex = &experts[static_cast<size_t>(r) * rc.top_k];
    float* w = &weights[static_cast<size_t>(r) * rc.top_k];
    route_row(row.data(), routing, ex, w);
  }
}

// gpt-oss's clamped SwiGLU and the others, in double, of fp32 gate and up (biases already added).
inline double gated_ref(double gate, double up, Activation act, double limit, double alpha) {
  if (act == Activation::kGeluTanh) {
    return 0.5 * gate * (1.0 + std::tanh(0.7978845608028654 * (gate + 0.044715 * gate * gate * gate))) * up;
  }
  if (act == Activation::kSwigluClamped) {
    gate = std::min(gate, limit);
    up = std::min(std::max(up, -limit), limit);
    return (up + 1.0) * gate / (1.0 + std::exp(-alpha * gate));
  }
  return gate / (1.0 + std::exp(-gate)) * up;
}

// The combine's inputs: routing of num_rows rows, expert outputs in slot order, optional down biases and
// shared expert (values as floats; the tests round them to T).
struct CombineCase {
  int num_rows, num_experts, top_k, dim;
  bool down_bias, shared;
};

struct CombineInput {
  std::vector<int32_t> experts;    // (rows, k)
  std::vector<float> weights;      // (rows, k)
  ExpertGroups groups;             // the CPU's grouping of experts
  std::vector<int32_t> pick_slot;  // (rows * k)
  std::vector<float> expert_out;   // (rows * k, dim) in slot order
  std::vector<float> down_bias;    // (experts, dim) or empty
  std::vector<float> shared_out;   // (rows, dim) or empty
  std::vector<float> h;            // (rows, dim) or empty
  std::vector<float> shared_gate;  // (dim) or empty
};

inline CombineInput make_combine_input(const CombineCase& cc, uint32_t seed) {
  const RouteCase rc{cc.num_rows, cc.num_experts, cc.top_k, true, MoeRouter::kSoftmaxTopk, false, false};
  CombineInput in;
  route_ref(rc, make_route_input(rc, seed), in.experts, in.weights);
  in.groups = group_by_expert(in.experts.data(), cc.num_rows, MoeRouting{cc.num_experts, cc.top_k, true});
  in.pick_slot.assign(in.groups.entries.size(), -1);
  for (size_t s = 0; s < in.groups.entries.size(); ++s) {
    in.pick_slot[static_cast<size_t>(in.groups.entries[s])] = static_cast<int32_t>(s);
  }
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (float& x : v) x = u(rng);
  };
  const size_t rows_dim = static_cast<size_t>(cc.num_rows) * cc.dim;
  fill(in.expert_out, rows_dim * cc.top_k);
  if (cc.down_bias) fill(in.down_bias, static_cast<size_t>(cc.num_experts) * cc.dim);
  if (cc.shared) {
    fill(in.shared_out, rows_dim);
    fill(in.h, rows_dim);
    fill(in.shared_gate, static_cast<size_t>(cc.dim));
  }
  return in;
}

// out (rows, dim) in double from the inputs as the kernel reads them (expert_out, shared_out and h
// already rounded to T by the caller).
inline std::vector<double> combine_ref(const CombineCase& cc, const CombineInput& in) {
  std::vector<double> out(static_cast<size_t>(cc.num_rows) * cc.dim);
  for (int r = 0; r < cc.num_rows; ++r) {
    double gate = 0.0;
    if (cc.shared) {
      double dot = 0.0;
      const float* hr = &in.h[static_cast<size_t>(r) * cc.dim];
      for (int i = 0; i < cc.dim; ++i) dot += static_cast<double>(hr[i]) * in.shared_gate[i];
      gate = 1.0 / (1.0 + std::exp(-dot));
    }
    for (int i = 0; i < cc.dim; ++i) {
      double v = cc.shared ? gate * in.shared_out[static_cast<size_t>(r) * cc.dim + i] : 0.0;
      for (int k = 0; k < cc.top_k; ++k) {
        const size_t pick = static_cast<size_t>(r) * cc.top_k + k;
        double y = in.expert_out[static_cast<size_t>(in.pick_slot[pick]) * cc.dim + i];
        if (cc.down_bias) y += in.down_bias[static_cast<size_t>(in.experts[pick]) * cc.dim + i];
        v += in.weights[pick] * y;
      }
      out[static_cast<size_t>(r) * cc.dim + i] = v;
    }
  }
  return out;
}

inline std::vector<CombineCase> combine_cases() {
  return {{5, 8, 2, 64, false, false}, {17, 8, 2, 200, true, false}, {17, 60, 4, 96, false, true},
          {33, 16, 16, 72, true, true}};
}

}  // namespace cbatch::test
