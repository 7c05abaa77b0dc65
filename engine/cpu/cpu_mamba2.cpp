// A Mamba-2 layer on the CPU (cpu_forward.hpp; Granite 4.0-H, Nemotron-H): x += out(gated_norm(scan(conv(x|B|C),
// dt), z)), with [z | x|B|C | dt] = in_proj(norm(x)) (Mamba2Sizes):
//  1. per sequence, the causal depthwise conv over the x|B|C channels with its bias and SiLU (its earlier inputs
//     from the sequence's conv window, cpu_recurrent.hpp), in place; per row dt = softplus(dt + dt_bias),
//     clamped to [dt_min, dt_max];
//  2. per sequence and head h (reading B and C of group h / (heads / groups)), token by token, the selective
//     scan on the head's state S (head_dim, state_size): S = S exp(dt A) + (dt x) B^T; y = S C + D x;
//  3. per row, y * silu(z) RMS-normed over groups of inner / groups values, times the norm weight; out_proj.
// The scan's order is the sequence's token order whatever the batch, chunk or thread count, so the state a
// chunked prefill leaves is bit-identical to a whole one's. A padding row (static mode) is computed from a
// copy of the state. LoRA adapters add to the in and out products (cpu_lora.hpp).
#include <algorithm>
#include <cmath>

#include "engine/cpu/cpu_forward.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_recurrent.hpp"

namespace cbatch {
namespace {

constexpr int kScanLanes = 16;  // partial sums of s c (one AVX-512 register, two AVX2 ones), summed pairwise

// One token of one head: s (head_dim, state) = s decay + (dt x) b^T; y = s c + d x. The inner loops run over
// the state's contiguous values; s c is summed in kScanLanes interleaved partial sums (value n into lane
// n % kScanLanes, a tail past the last full group into its own sum), then pairwise: a fixed order, so the
// compiler vectorizes it and the result depends on nothing but the state and the row.
void scan_step(float* s, const float* x, const float* b, const float* c, float dt, float decay, float d, int head_dim,
               int state, float* y) {
  const int full = state - state % kScanLanes;
  for (int p = 0; p < head_dim; ++p) {
    float* row = s + static_cast<int64_t>(p) * state;
    const float dx = dt * x[p];
    float lanes[kScanLanes] = {};
    for (int n = 0; n < full; n += kScanLanes) {
      for (int k = 0; k < kScanLanes; ++k) {
        row[n + k] = row[n + k] * decay + dx * b[n + k];
        lanes[k] += row[n + k] * c[n + k];
      }
    }
    float tail = 0.0f;
    for (int n = full; n < state; ++n) {
      row[n] = row[n] * decay + dx * b[n];
      tail += row[n] * c[n];
    }
    for (int width = kScanLanes / 2; width > 0; width /= 2) {
      for (int k = 0; k < width; ++k) lanes[k] += lanes[k + width];
    }
    y[p] = (lanes[0] + tail) + d * x[p];
  }
}

}  // namespace

void CpuBackend::mamba2_layer(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int num_tokens = batch.num_tokens();
  mixer_norm(num_tokens, layer);
  matmul(h_.data(), layer.matrix(LayerTensor::kMambaIn), mamba_proj_.data(), num_tokens, pool_);
  const Mamba2Sizes& m = config_.mamba;
  lora_.add(LoraProduct::kMambaIn, l, lora_groups_, h_.data(), config_.dim, mamba_proj_.data(), m.in_proj_dim(), pool_);
  mamba2_conv_and_dt(batch, l);
  mamba2_scan(batch, l);
  mamba2_gated_norm(num_tokens, layer);
  matmul(mamba_y_.data(), layer.matrix(LayerTensor::kMambaOut), delta_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kMambaOut, l, lora_groups_, mamba_y_.data(), m.inner(), delta_.data(), config_.dim, pool_);
  add_sublayer_output(num_tokens, {}, {}, {});
}

// Step 1: the conv in place over x|B|C, sequence by sequence; dt row by row.
void CpuBackend::mamba2_conv_and_dt(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const Mamba2Sizes& m = config_.mamba;
  const int64_t stride = m.in_proj_dim();
  const ConvTaps conv{layer.vector(LayerTensor::kMambaConv).data(), layer.vector(LayerTensor::kMambaConvBias).data(),
                      m.conv_dim(), m.conv_kernel, true};
  pool_.parallel_for(batch.num_seqs(), [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const SeqRows rows = seq_rows(batch, static_cast<int>(s));
      if (rows.count == 0) continue;
      float* window = states_.conv_window(batch.state_slots[static_cast<size_t>(s)], l);
      float* xbc = &mamba_proj_[rows.begin * stride + m.inner()];
      causal_conv(xbc, stride, rows, conv, window, xbc, stride);
    }
  }, 1, min_parallel_items(1.0 * m.conv_dim() * m.conv_kernel * batch.max_query_len));
  const float* dt_bias = layer.vector(LayerTensor::kMambaDtBias).data();
  const float dt_max = m.dt_max > 0.0f ? m.dt_max : INFINITY;
  for (int64_t r = 0; r < batch.num_tokens(); ++r) {
    const float* raw = &mamba_proj_[r * stride + m.inner() + m.conv_dim()];
    float* dt = &mamba_dt_[r * m.num_heads];
    for (int h = 0; h < m.num_heads; ++h) dt[h] = std::clamp(softplus(raw[h] + dt_bias[h]), m.dt_min, dt_max);
  }
}

// Step 2, per sequence and head, token by token; padding rows run on a copy of the state.
void CpuBackend::mamba2_scan(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const Mamba2Sizes& m = config_.mamba;
  const int heads = m.num_heads, p = m.head_dim, n = m.state_size;
  const int64_t stride = m.in_proj_dim(), state_floats = static_cast<int64_t>(p) * n;
  const float* a = layer.vector(LayerTensor::kMambaDecay).data();  // A (negative)
  const float* d = layer.vector(LayerTensor::kMambaD).data();
  pool_.parallel_for(static_cast<int64_t>(batch.num_seqs()) * heads, [&](int64_t begin, int64_t end) {
    float* scratch = scratch_floats(state_floats);  // a padding row's state
    for (int64_t item = begin; item < end; ++item) {
      const int s = static_cast<int>(item / heads), h = static_cast<int>(item % heads);
      const SeqRows rows = seq_rows(batch, s);
      if (rows.count == 0) continue;
      float* state = states_.recurrent(batch.state_slots[static_cast<size_t>(s)], l) + h * state_floats;
      const int g = m.group_of(h);
      for (int t = 0; t < rows.count; ++t) {
        if (t == rows.real) {  // padding rows follow: they leave the sequence's state as it was
          std::copy_n(state, state_floats, scratch);
          state = scratch;
        }
        const int64_t r = rows.begin + t;
        const float* xbc = &mamba_proj_[r * stride + m.inner()];
        const float* b = xbc + m.inner() + g * n;
        const float* c = xbc + m.inner() + m.num_groups * n + g * n;
        const float dt = mamba_dt_[r * heads + h];
        scan_step(state, xbc + h * p, b, c, dt, std::exp(dt * a[h]), d[h], p, n, &mamba_y_[r * m.inner() + h * p]);
      }
    }
  }, 1, min_parallel_items(3.0 * state_floats * batch.max_query_len));
}

// Step 3, row by row: y * silu(z), RMS-normed per group, times the norm weight.
void CpuBackend::mamba2_gated_norm(int num_tokens, const CpuLayer& layer) {
  const Mamba2Sizes& m = config_.mamba;
  const int inner = m.inner(), group = inner / m.num_groups;
  const int64_t stride = m.in_proj_dim();
  const float* norm = layer.vector(LayerTensor::kMambaNorm).data();
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* y = &mamba_y_[r * inner];
      const float* z = &mamba_proj_[r * stride];
      for (int i = 0; i < inner; ++i) y[i] *= silu(z[i]);
      for (int g = 0; g < m.num_groups; ++g) rmsnorm_row(y + g * group, norm + g * group, y + g * group, group, config_.rms_eps);
    }
  }, 1, min_parallel_items(15.0 * inner));
}

}  // namespace cbatch
