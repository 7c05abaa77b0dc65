// The routed experts' products in one pass over the pool (cpu_moe_experts.hpp).
#include "engine/cpu/cpu_moe_experts.hpp"

#include <algorithm>
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/base/thread_pool.hpp"

namespace cbatch {
namespace {

using matmul_detail::Q8Rows;

// Rows `rows` (n) of the quantized from into to's rows [0, n).
void gather_q8(const Q8Rows& from, const int32_t* rows, int n, Q8Rows& to) {
  const int64_t k = from.cols, blocks = k / from.block, halves = k / 16;
  const int64_t split = from.block == matmul_detail::kSuperK ? 4 * blocks : 0;
  to.rows = n;
  to.cols = k;
  to.block = from.block;
  const auto need = static_cast<size_t>(n * k);
  if (to.q.size() < need) to.q.resize(need);
  if (to.d.size() < need / from.block) to.d.resize(need / from.block);
  if (to.sums.size() < need / 16) to.sums.resize(need / 16);
  if (to.split_sums.size() < static_cast<size_t>(n * split)) to.split_sums.resize(static_cast<size_t>(n * split));
  for (int i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    std::memcpy(&to.q[static_cast<size_t>(i * k)], &from.q[static_cast<size_t>(r * k)], static_cast<size_t>(k));
    std::copy_n(&from.d[static_cast<size_t>(r * blocks)], blocks, &to.d[static_cast<size_t>(i * blocks)]);
    std::copy_n(&from.sums[static_cast<size_t>(r * halves)], halves, &to.sums[static_cast<size_t>(i * halves)]);
    std::copy_n(from.split_sums.data() + r * split, split, to.split_sums.data() + i * split);
  }
}

// One-core cost of an (N, K) product over n rows: each panel of kLanes columns streams its weights and
// multiplies them into every row (matmul's own estimates).
double product_ns(const PackedMatrix& w, int n) {
  const double lanes = matmul_panel_width();
  const double panels = static_cast<double>((w.rows() + matmul_panel_width() - 1) / matmul_panel_width());
  const double per_weight = w.is_int8() ? 0.003 * n + 0.1 : 0.01 * n + 0.2;
  return panels * lanes * static_cast<double>(w.cols()) * per_weight;
}

double unit_ns(const std::vector<CpuExpert>& experts, const ExpertUnit& u) {
  const CpuExpert& e = experts[static_cast<size_t>(u.expert)];
  const PackedMatrix& down = e.matrix(ExpertTensor::kDown);
  return product_ns(e.matrix(ExpertProduct::kGateUp), u.num_rows) + product_ns(down, u.num_rows) +
         10.0 * static_cast<double>(down.cols()) * u.num_rows;  // an exp or tanh per hidden element
}

struct StepView {  // what every unit reads
  const float* h;
  int dim;
  const std::vector<CpuExpert>& experts;
  const GluParams& glu;
  const ExpertScratch& s;
  const int32_t* picks;  // (T * top_k) the (row, k) pick of each sorted pick
  float* out;
};

// One unit: gather, gate|up, activation, down, each row's result to its pick's row of out.
void run_unit(const StepView& v, const ExpertUnit& u, ExpertThreadScratch& t) {
  const int n = u.num_rows, dim = v.dim;
  const CpuExpert& e = v.experts[static_cast<size_t>(u.expert)];
  const PackedMatrix& gate_up = e.matrix(ExpertProduct::kGateUp);
  const PackedMatrix& down = e.matrix(ExpertTensor::kDown);
  const int64_t width = down.cols();
  const int32_t* rows = &v.s.slot_rows[static_cast<size_t>(u.slot_begin)];
  if (gate_up.is_int8()) {
    gather_q8(v.s.h_q8, rows, n, t.q_in);
  } else {
    t.rows_in.resize(static_cast<size_t>(n) * dim);
    for (int i = 0; i < n; ++i) {
      std::copy_n(v.h + static_cast<int64_t>(rows[i]) * dim, dim, &t.rows_in[static_cast<size_t>(i) * dim]);
    }
  }
  t.gate_up.resize(static_cast<size_t>(n * 2 * width));
  t.hidden.resize(static_cast<size_t>(n * width));
  matmul_on_thread(t.rows_in.data(), &t.q_in, gate_up, t.gate_up.data(), n);
  add_bias_rows(t.gate_up.data(), n, &e.vector(ExpertProduct::kGateUpBias));  // empty without expert biases
  for (int r = 0; r < n; ++r) {
    gated_ffn_row(&t.gate_up[r * 2 * width], &t.hidden[r * width], static_cast<int>(width), v.glu);
  }
  if (down.is_int8()) {
    matmul_detail::quantize_rows_q8(t.hidden.data(), n, width, matmul_detail::q8_block(down.dtype()), t.q_hidden);
  }
  t.rows_out.resize(static_cast<size_t>(n) * dim);
  matmul_on_thread(t.hidden.data(), &t.q_hidden, down, t.rows_out.data(), n);
  add_bias_rows(t.rows_out.data(), n, &e.vector(ExpertTensor::kDownBias));
  for (int i = 0; i < n; ++i) {
    const int64_t pick = v.picks[u.slot_begin + i];
    std::copy_n(&t.rows_out[static_cast<size_t>(i) * dim], dim, v.out + pick * dim);
  }
}

// The units of the touched experts (at most max_rows picks each), and their split into num_threads
// contiguous runs of about equal cost. Returns the total cost in one-core ns.
double plan_units(const ExpertGroups& g, const std::vector<CpuExpert>& experts, int max_rows, int num_threads,
                  ExpertScratch& s) {
  s.units.clear();
  std::vector<double>& cost = s.unit_cost_ns;
  cost.clear();
  double total = 0.0;
  for (int e = 0; e + 1 < static_cast<int>(g.offsets.size()); ++e) {
    for (int begin = g.offsets[e]; begin < g.offsets[e + 1]; begin += max_rows) {
      s.units.push_back(ExpertUnit{e, begin, std::min(max_rows, g.offsets[e + 1] - begin)});
      cost.push_back(unit_ns(experts, s.units.back()));
      total += cost.back();
    }
  }
  // Unit i goes to the thread whose share of the total holds its middle.
  s.thread_units.assign(static_cast<size_t>(num_threads) + 1, static_cast<int32_t>(s.units.size()));
  s.thread_units[0] = 0;
  double before = 0.0;
  int thread = 0;
  for (size_t i = 0; i < s.units.size(); ++i) {
    const int want = std::min(num_threads - 1, static_cast<int>((before + cost[i] / 2) * num_threads / total));
    while (thread < want) s.thread_units[static_cast<size_t>(++thread)] = static_cast<int32_t>(i);
    before += cost[i];
  }
  return total;
}

}  // namespace

void add_bias_rows(float* rows, int64_t n, const std::vector<float>* bias) {
  if (bias == nullptr || bias->empty()) return;
  const int64_t cols = static_cast<int64_t>(bias->size());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < cols; ++i) rows[r * cols + i] += (*bias)[static_cast<size_t>(i)];
  }
}

int run_experts(const float* h, int num_rows, int dim, const ExpertGroups& groups, int top_k,
                const std::vector<CpuExpert>& experts, const GluParams& glu, ThreadPool& pool, ExpertScratch& s,
                float* out) {
  const int picks = num_rows * top_k, num_threads = pool.num_threads();
  s.slot_rows.resize(static_cast<size_t>(picks));
  for (int i = 0; i < picks; ++i) s.slot_rows[static_cast<size_t>(i)] = groups.entries[static_cast<size_t>(i)] / top_k;
  // Enough units for the threads to share even when few experts are picked, few enough to read each
  // expert's weights about once.
  const int max_rows = std::max(16, (picks + 4 * num_threads - 1) / (4 * num_threads));
  const double total_ns = plan_units(groups, experts, max_rows, num_threads, s);
  int q8_block = 0;  // the activation block of the int8 experts' gate|up (one tensor's: the same for all)
  int num_touched = 0;
  for (size_t i = 0; i < s.units.size(); ++i) {
    const ExpertUnit& u = s.units[i];
    const PackedMatrix& gate_up = experts[static_cast<size_t>(u.expert)].matrix(ExpertProduct::kGateUp);
    if (gate_up.is_int8() && q8_block != 0 && matmul_detail::q8_block(gate_up.dtype()) != q8_block) {
      throw Error("internal error: experts whose int8 weights take different activation blocks");
    }
    if (gate_up.is_int8()) q8_block = matmul_detail::q8_block(gate_up.dtype());
    num_touched += i == 0 || s.units[i - 1].expert != u.expert;
  }
  if (q8_block != 0) matmul_detail::quantize_rows_q8(h, num_rows, dim, q8_block, s.h_q8);  // once per row, not per pick
  if (s.threads.size() < static_cast<size_t>(num_threads)) s.threads.resize(static_cast<size_t>(num_threads));
  const StepView view{h, dim, experts, glu, s, groups.entries.data(), out};
  pool.parallel_for(num_threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int32_t i = s.thread_units[static_cast<size_t>(t)]; i < s.thread_units[static_cast<size_t>(t) + 1]; ++i) {
        run_unit(view, s.units[static_cast<size_t>(i)], s.threads[static_cast<size_t>(t)]);
      }
    }
  }, 1, total_ns < kMinParallelNs ? num_threads + 1 : 2);
  return num_touched;
}

}  // namespace cbatch
