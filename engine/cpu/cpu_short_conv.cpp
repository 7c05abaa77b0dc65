// LFM2's short-convolution layer on the CPU (cpu_forward.hpp): x += out(C * conv(B * x)), with [B | C | x] =
// in_proj(norm(x)) (each dim wide) and conv the causal depthwise convolution over dim channels (short_conv_kernel
// taps, no bias, no activation) whose earlier inputs come from the sequence's conv window (a state slot),
// advanced by the step's real rows (cpu_recurrent.hpp). LoRA adapters add to both products (cpu_lora.hpp).
#include "engine/cpu/cpu_forward.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_recurrent.hpp"

namespace cbatch {

void CpuBackend::short_conv_layer(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int num_tokens = batch.num_tokens(), dim = config_.dim;
  mixer_norm(num_tokens, layer);
  matmul(h_.data(), layer.matrix(LayerTensor::kShortConvIn), ssm_proj_.data(), num_tokens, pool_);
  const int64_t proj_stride = 3LL * dim;  // a row's [B | C | x]
  lora_.add(LoraProduct::kShortConvIn, l, lora_groups_, h_.data(), dim, ssm_proj_.data(), proj_stride, pool_);
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* b = &ssm_proj_[r * proj_stride];
      const float* x = b + 2 * dim;
      float* bx = &ssm_conv_[r * dim];
      for (int i = 0; i < dim; ++i) bx[i] = b[i] * x[i];
    }
  }, 1, min_parallel_items(0.5 * dim));
  const ConvTaps conv{layer.vector(LayerTensor::kShortConvTaps).data(), nullptr, dim, config_.short_conv_kernel, false};
  pool_.parallel_for(batch.num_seqs(), [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const SeqRows rows = seq_rows(batch, static_cast<int>(s));
      if (rows.count == 0) continue;
      float* window = states_.conv_window(batch.state_slots[static_cast<size_t>(s)], l);
      float* bx = &ssm_conv_[static_cast<int64_t>(rows.begin) * dim];
      causal_conv(bx, dim, rows, conv, window, bx, dim);
    }
  }, 1, min_parallel_items(1.0 * dim * conv.kernel * batch.max_query_len));
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* c = &ssm_proj_[r * proj_stride + dim];
      float* y = &ssm_conv_[r * dim];
      for (int i = 0; i < dim; ++i) y[i] *= c[i];
    }
  }, 1, min_parallel_items(0.5 * dim));
  matmul(ssm_conv_.data(), layer.matrix(LayerTensor::kShortConvOut), delta_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kShortConvOut, l, lora_groups_, ssm_conv_.data(), dim, delta_.data(), dim, pool_);
  add_sublayer_output(num_tokens, {}, {}, {});
}

}  // namespace cbatch
