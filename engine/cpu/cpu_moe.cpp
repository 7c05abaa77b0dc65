// Routing, grouping by expert and the grouped expert products of a mixture-of-experts layer (cpu_moe.hpp).
#include "engine/cpu/cpu_moe.hpp"

#include <algorithm>
#include <cmath>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_ops.hpp"

namespace cbatch {

void route_row(const float* logits, const MoeRouting& r, int32_t* experts, float* weights) {
  // Experts in id order, each inserted after every chosen one with a logit at least as large (so a tie
  // keeps the lower id ahead); once k are chosen, one enters only above the last, which drops out.
  int count = 0;
  for (int e = 0; e < r.num_experts; ++e) {
    if (count == r.top_k && !(logits[e] > logits[experts[count - 1]])) continue;
    int pos = count < r.top_k ? count++ : count - 1;
    for (; pos > 0 && logits[e] > logits[experts[pos - 1]]; --pos) experts[pos] = experts[pos - 1];
    experts[pos] = e;
  }
  const float max_logit = logits[experts[0]];  // the largest logit of all, and of the chosen
  float sum = 0.0f;
  if (r.rule == MoeRouter::kTopkSoftmax) {
    for (int k = 0; k < r.top_k; ++k) sum += std::exp(logits[experts[k]] - max_logit);
  } else {
    for (int e = 0; e < r.num_experts; ++e) sum += std::exp(logits[e] - max_logit);
  }
  for (int k = 0; k < r.top_k; ++k) weights[k] = std::exp(logits[experts[k]] - max_logit) / sum;
  if (!r.renormalize || r.rule == MoeRouter::kTopkSoftmax) return;
  float picked = 0.0f;
  for (int k = 0; k < r.top_k; ++k) picked += weights[k];
  for (int k = 0; k < r.top_k; ++k) weights[k] /= picked;
}

ExpertGroups group_by_expert(const int32_t* experts, int num_rows, const MoeRouting& r) {
  ExpertGroups g;
  const int picks = num_rows * r.top_k;
  g.offsets.assign(static_cast<size_t>(r.num_experts) + 1, 0);
  for (int i = 0; i < picks; ++i) ++g.offsets[experts[i] + 1];
  for (int e = 0; e < r.num_experts; ++e) g.offsets[e + 1] += g.offsets[e];
  g.entries.resize(static_cast<size_t>(picks));
  std::vector<int32_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (int i = 0; i < picks; ++i) g.entries[next[experts[i]]++] = i;
  return g;
}

namespace {

// out (n, dim) = down(act(gate(x)) * up(x)) for x (n, dim), one gated FFN over n gathered rows; the
// biases (or nullptr) are added to each product.
void expert_rows(const float* x, int n, const PackedMatrix& gate_up, const PackedMatrix& down,
                 const std::vector<float>* gate_up_bias, const std::vector<float>* down_bias, const GluParams& glu,
                 ThreadPool& pool, MoeScratch& s, float* out) {
  const int64_t width = down.cols();
  s.gate_up.resize(static_cast<size_t>(n * 2 * width));
  s.hidden.resize(static_cast<size_t>(n * width));
  matmul(x, gate_up, s.gate_up.data(), n, pool);
  add_bias_rows(s.gate_up.data(), n, gate_up_bias);
  for (int r = 0; r < n; ++r) {
    gated_ffn_row(&s.gate_up[r * 2 * width], &s.hidden[r * width], static_cast<int>(width), glu);
  }
  matmul(s.hidden.data(), down, out, n, pool);
  add_bias_rows(out, n, down_bias);
}

}  // namespace

int moe_ffn(const float* h, int num_rows, int dim, const CpuLayer& w, const MoeRouting& r, const GluParams& glu,
            ThreadPool& pool, MoeScratch& s, float* out, const float* route) {
  const int k = r.top_k;
  s.logits.resize(static_cast<size_t>(num_rows) * r.num_experts);
  s.experts.resize(static_cast<size_t>(num_rows) * k);
  s.weights.resize(static_cast<size_t>(num_rows) * k);
  s.picks.resize(static_cast<size_t>(num_rows) * k * dim);
  matmul(route != nullptr ? route : h, w.matrix(LayerTensor::kRouter), s.logits.data(), num_rows, pool);
  add_bias_rows(s.logits.data(), num_rows, &w.vector(LayerTensor::kRouterBias));
  pool.parallel_for(num_rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      route_row(&s.logits[static_cast<size_t>(row) * r.num_experts], r, &s.experts[row * k], &s.weights[row * k]);
      for (int j = 0; j < k && r.expert_scale != nullptr; ++j) s.weights[row * k + j] *= r.expert_scale[s.experts[row * k + j]];
    }
  }, 1, min_parallel_items(8.0 * r.num_experts));  // an exp and a comparison or two per expert
  const ExpertGroups groups = group_by_expert(s.experts.data(), num_rows, r);
  const int num_touched = run_experts(h, num_rows, dim, groups, k, w.experts, glu, pool, s.products, s.picks.data());
  const std::vector<float>& shared_gate = w.vector(LayerTensor::kSharedExpertGate);
  const bool has_shared = w.matrix(LayerTensor::kSharedDown).rows() > 0;
  if (!has_shared) {
    std::fill_n(out, static_cast<int64_t>(num_rows) * dim, 0.0f);
  } else {  // the shared expert over every row, scaled by its sigmoid gate where it has one (Granite's has none)
    expert_rows(h, num_rows, w.matrix(LayerProduct::kSharedGateUp), w.matrix(LayerTensor::kSharedDown), nullptr,
                nullptr, glu, pool, s, out);
    for (int row = 0; row < num_rows && !shared_gate.empty(); ++row) {
      float logit = 0.0f;
      for (int i = 0; i < dim; ++i) logit += h[static_cast<int64_t>(row) * dim + i] * shared_gate[i];
      const float gate = 1.0f / (1.0f + std::exp(-logit));
      for (int i = 0; i < dim; ++i) out[static_cast<int64_t>(row) * dim + i] *= gate;
    }
  }
  // Each row's k picks in k order, then the shared expert's part (zero without one).
  pool.parallel_for(num_rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float* y = out + row * dim;
      for (int i = 0; i < dim; ++i) {
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) sum += s.weights[row * k + j] * s.picks[(row * k + j) * dim + i];
        y[i] += sum;
      }
    }
  }, 1, min_parallel_items(2.0 * k * dim));
  return num_touched;
}

}  // namespace cbatch
