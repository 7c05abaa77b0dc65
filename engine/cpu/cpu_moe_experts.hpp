// The routed experts' products of one mixture-of-experts step, in one pass over the thread pool. The
// step's picks, sorted by expert (group_by_expert), are cut into units (consecutive picks of one expert,
// at most a cap of them); the units go to the threads in contiguous runs of about equal cost (expert
// weights read plus rows multiplied), and each thread runs its units start to end with its own buffers:
// gather the rows (int8 weights: rows of the input quantized once per row, not once per pick), gate|up
// product and biases, the gated activation, down product and biases. A pick's row goes through the same
// code whatever unit or thread it lands in, so its result is the bits of that row alone.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_matmul_int8.hpp"
#include "engine/cpu/cpu_ops.hpp"
#include "engine/cpu/cpu_weights.hpp"

namespace cbatch {

class ThreadPool;

// (row, k) picks grouped by expert: the picks of expert e are entries[offsets[e] .. offsets[e + 1]),
// each row * top_k + k, in row order.
struct ExpertGroups {
  std::vector<int32_t> offsets;  // (num_experts + 1)
  std::vector<int32_t> entries;  // (num_rows * top_k)
};

// Consecutive picks [slot_begin, slot_begin + num_rows) of the sorted picks, all of one expert.
struct ExpertUnit {
  int32_t expert = 0;
  int32_t slot_begin = 0;
  int32_t num_rows = 0;
};

// One thread's buffers (rows: at most a unit's).
struct ExpertThreadScratch {
  std::vector<float> rows_in;         // (rows, dim) gathered input rows (fp32 weights)
  matmul_detail::Q8Rows q_in;         // (rows, dim) gathered quantized input rows (int8 weights)
  std::vector<float> gate_up;         // (rows, 2 * width)
  std::vector<float> hidden;          // (rows, width)
  matmul_detail::Q8Rows q_hidden;     // (rows, width) hidden quantized (int8 weights)
  std::vector<float> rows_out;        // (rows, dim)
};

// Buffers reused across steps and layers.
struct ExpertScratch {
  matmul_detail::Q8Rows h_q8;              // (T, dim) the input quantized, when an expert is int8
  std::vector<int32_t> slot_rows;          // (T * top_k) input row of each sorted pick
  std::vector<ExpertUnit> units;           // the step's units, in sorted-pick order
  std::vector<double> unit_cost_ns;        // (units) one-core cost of each
  std::vector<int32_t> thread_units;       // (num_threads + 1) thread t runs units [thread_units[t], [t + 1])
  std::vector<ExpertThreadScratch> threads;  // (num_threads)
};

// rows (n, cols) += bias (cols), when there is one.
void add_bias_rows(float* rows, int64_t n, const std::vector<float>* bias);

// out (T, top_k, dim): each (row, k) pick's expert output for its row of h (T, dim). Returns the number
// of distinct experts picked (the experts whose weights were read).
int run_experts(const float* h, int num_rows, int dim, const ExpertGroups& groups, int top_k,
                const std::vector<CpuExpert>& experts, const GluParams& glu, ThreadPool& pool, ExpertScratch& s,
                float* out);

}  // namespace cbatch
