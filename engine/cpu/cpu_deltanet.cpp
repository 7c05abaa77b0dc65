// A gated DeltaNet layer of the CPU backend's forward pass (cpu_forward.hpp; Qwen3.5's linear attention):
// x += out(gated_norm(delta_rule(conv(qkv(h))), z)), h = norm(x), over each sequence's rows in token order:
//  1. the products of h by [q|k|v | z] and [b | a] (LayerProduct::kSsmQkvz, kSsmBa; Qwen3-Next's rows,
//     grouped by key head, are put in that order: deltanet_layout.hpp);
//  2. the causal depthwise conv over the q|k|v channels (conv_kernel taps, the earlier inputs from the
//     sequence's conv window, which the step then advances), SiLU;
//  3. per row: q and k L2-normed per key head (x / sqrt(sum x^2 + 1e-6)), q scaled by k_head_dim^-1/2;
//     per value head beta = sigmoid(b) and the decay factor exp(A softplus(a + dt_bias));
//  4. per sequence and value head j (reading key head DeltaNetSizes::key_head_of(j)), token by token, the delta
//     rule on its state S (k_head_dim, v_head_dim): S *= decay; S += k (beta (v - k S)); o = q S;
//  5. per row and value head, RMSNorm(o) w silu(z); the output product.
// LoRA adapters add to the input products (in the file's row order) and the output product (cpu_lora.hpp).
// Each value is computed from its own sequence's rows in a fixed order, so a prompt prefilled in chunks
// leaves the same state, bit for bit, as one prefilled whole, whatever else shares the batch or the threads.
// A padding row (static mode, slot_mapping -1) is computed from the state but leaves it as it was.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/cpu_forward.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_recurrent.hpp"
#include "engine/model/deltanet_layout.hpp"

namespace cbatch {
namespace {

void l2_normalize(float* x, int n, float scale) {
  float sum_sq = 0.0f;
  for (int i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float inv = scale / std::sqrt(sum_sq + 1e-6f);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// One token of the delta rule on state s (dk, dv): s *= decay; s += k (beta (v - k s)); o = q s. The first
// pass only reads s (k s of the old state, times decay after), the second writes it once: s decay + k delta.
void delta_step(float* s, const float* q, const float* k, const float* v, float beta, float decay, int dk, int dv,
                float* ks, float* o) {
  std::fill_n(ks, dv, 0.0f);
  for (int i = 0; i < dk; ++i) {
    const float* row = s + static_cast<int64_t>(i) * dv;
    for (int j = 0; j < dv; ++j) ks[j] += k[i] * row[j];
  }
  for (int j = 0; j < dv; ++j) ks[j] = (v[j] - decay * ks[j]) * beta;  // now the delta
  std::fill_n(o, dv, 0.0f);
  for (int i = 0; i < dk; ++i) {
    float* row = s + static_cast<int64_t>(i) * dv;
    for (int j = 0; j < dv; ++j) {
      row[j] = row[j] * decay + k[i] * ks[j];
      o[j] += q[i] * row[j];
    }
  }
}

}  // namespace

void CpuBackend::deltanet_layer(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int num_tokens = batch.num_tokens();
  mixer_norm(num_tokens, layer);
  matmul(h_.data(), layer.matrix(LayerProduct::kSsmQkvz), ssm_proj_.data(), num_tokens, pool_);
  matmul(h_.data(), layer.matrix(LayerProduct::kSsmBa), ssm_ba_.data(), num_tokens, pool_);
  const DeltaNetSizes& d = config_.deltanet;
  // Adapters add in the files' row order, before Qwen3-Next's grouped rows are put in the standard one.
  const int dim = config_.dim, nv = d.num_v_heads;
  const int64_t proj_stride = d.conv_dim() + d.value_dim();
  lora_.add(LoraProduct::kSsmQkvz, l, lora_groups_, h_.data(), dim, ssm_proj_.data(), proj_stride, pool_);
  lora_.add(LoraProduct::kSsmBa, l, lora_groups_, h_.data(), dim, ssm_ba_.data(), 2 * nv, pool_);
  if (d.grouped_qkvz) reorder_values(ssm_proj_.data(), num_tokens, standard_order(grouped_qkvz_runs(d), proj_stride));
  if (d.grouped_ba) reorder_values(ssm_ba_.data(), num_tokens, standard_order(grouped_ba_runs(d), 2 * nv));
  deltanet_conv(batch, l);
  deltanet_gates(num_tokens, layer);
  deltanet_recurrence(batch, l);
  deltanet_gated_norm(num_tokens, layer);
  matmul(ssm_core_.data(), layer.matrix(LayerTensor::kSsmOut), delta_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kSsmOut, l, lora_groups_, ssm_core_.data(), d.value_dim(), delta_.data(), dim, pool_);
  add_sublayer_output(num_tokens, {}, {}, {});
}

// Step 2, sequence by sequence (each in its rows' order).
void CpuBackend::deltanet_conv(const RaggedBatch& batch, int l) {
  const DeltaNetSizes& d = config_.deltanet;
  const int64_t proj_stride = d.conv_dim() + d.value_dim();
  const float* taps = weights_.layers[static_cast<size_t>(l)].vector(LayerTensor::kSsmConv).data();
  const double seq_ns = 1.0 * d.conv_dim() * d.conv_kernel * batch.max_query_len;
  pool_.parallel_for(batch.num_seqs(), [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const SeqRows rows = seq_rows(batch, static_cast<int>(s));
      if (rows.count == 0) continue;
      float* window = states_.conv_window(batch.state_slots[static_cast<size_t>(s)], l);
      causal_conv(&ssm_proj_[rows.begin * proj_stride], proj_stride, rows, {taps, nullptr, d.conv_dim(), d.conv_kernel, true},
                  window, &ssm_conv_[static_cast<int64_t>(rows.begin) * d.conv_dim()], d.conv_dim());
    }
  }, 1, min_parallel_items(seq_ns));
}

// Step 3, row by row: q and k normed in ssm_conv_, beta and the decay factor into ssm_gates_.
void CpuBackend::deltanet_gates(int num_tokens, const CpuLayer& layer) {
  const DeltaNetSizes& d = config_.deltanet;
  const int nv = d.num_v_heads, dk = d.k_head_dim;
  const float* dt_bias = layer.vector(LayerTensor::kSsmDtBias).data();
  const float* decay = layer.vector(LayerTensor::kSsmDecay).data();  // A (negative)
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* qk = &ssm_conv_[r * d.conv_dim()];
      for (int h = 0; h < d.num_k_heads; ++h) {
        l2_normalize(qk + h * dk, dk, q_scale);
        l2_normalize(qk + d.key_dim() + h * dk, dk, 1.0f);
      }
      const float* b = &ssm_ba_[r * 2 * nv];
      const float* a = b + nv;
      float* gates = &ssm_gates_[r * 2 * nv];
      for (int h = 0; h < nv; ++h) {
        gates[h] = sigmoid(b[h]);
        gates[nv + h] = std::exp(decay[h] * softplus(a[h] + dt_bias[h]));
      }
    }
  }, 1, min_parallel_items(20.0 * (d.key_dim() + nv)));
}

// Step 4, per sequence and value head, token by token; padding rows run on a copy of the state.
void CpuBackend::deltanet_recurrence(const RaggedBatch& batch, int l) {
  const DeltaNetSizes& d = config_.deltanet;
  const int nv = d.num_v_heads, dk = d.k_head_dim, dv = d.v_head_dim;
  const int64_t state_floats = static_cast<int64_t>(dk) * dv;
  const double item_ns = 1.0 * state_floats * batch.max_query_len;
  pool_.parallel_for(static_cast<int64_t>(batch.num_seqs()) * nv, [&](int64_t begin, int64_t end) {
    float* scratch = scratch_floats(state_floats + dv);  // a padding row's state, then k s
    for (int64_t item = begin; item < end; ++item) {
      const int s = static_cast<int>(item / nv), h = static_cast<int>(item % nv);
      const SeqRows rows = seq_rows(batch, s);
      if (rows.count == 0) continue;
      float* state = states_.recurrent(batch.state_slots[static_cast<size_t>(s)], l) + h * state_floats;
      const int kh = d.key_head_of(h);
      for (int t = 0; t < rows.count; ++t) {
        if (t == rows.real) {  // padding rows follow: they leave the sequence's state as it was
          std::copy_n(state, state_floats, scratch);
          state = scratch;
        }
        const int64_t r = rows.begin + t;
        const float* conv = &ssm_conv_[r * d.conv_dim()];
        const float* gates = &ssm_gates_[r * 2 * nv];
        delta_step(state, conv + kh * dk, conv + d.key_dim() + kh * dk, conv + 2 * d.key_dim() + h * dv, gates[h],
                   gates[nv + h], dk, dv, scratch + state_floats, &ssm_core_[r * d.value_dim() + h * dv]);
      }
    }
  }, 1, min_parallel_items(item_ns));
}

// Step 5, row by row: RMSNorm of each value head's output times w, times silu(z).
void CpuBackend::deltanet_gated_norm(int num_tokens, const CpuLayer& layer) {
  const DeltaNetSizes& d = config_.deltanet;
  const int dv = d.v_head_dim;
  const int64_t proj_stride = d.conv_dim() + d.value_dim();
  const float* norm = layer.vector(LayerTensor::kSsmNorm).data();
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* o = &ssm_core_[r * d.value_dim()];
      const float* z = &ssm_proj_[r * proj_stride + d.conv_dim()];
      for (int h = 0; h < d.num_v_heads; ++h) rmsnorm_row(o + h * dv, norm, o + h * dv, dv, config_.rms_eps);
      for (int i = 0; i < d.value_dim(); ++i) o[i] *= silu(z[i]);
    }
  }, 1, min_parallel_items(15.0 * d.value_dim()));
}

}  // namespace cbatch
