// A layer of the CPU backend's forward pass (cpu_forward.hpp), reading the layer's weights by kind of the
// tensor table: attention with the layer's own sizes (norm, the fused QKV product and its biases, Qwen3.5's
// output gate split off the q rows, keys copied to values where they are the same (Gemma 4), q/k norms, the
// V norm, RoPE over the layer's table's rotary dims, K/V into the paged cache of the layer (or, for a layer
// that shares another's K/V, nothing written and that layer's cache read), attention with the layer's
// window and sinks, the gate, the output product and bias, a sandwich norm), then the FFN (gated with
// SwiGLU, GeGLU or the clamped SwiGLU; a sparse layer's experts: cpu_moe.hpp, or beside the dense MLP:
// cpu_experts_beside_dense.cpp; an encoder's post-norm plain FFN), LoRA adapters added after each product
// they target (cpu_lora.hpp).
#include <algorithm>
#include <cmath>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_forward.hpp"
#include "engine/cpu/cpu_attention.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_rope.hpp"

namespace cbatch {
namespace {

// The calling thread's attention scratch, at least `count` floats: grown to the longest context seen,
// then reused (no allocation per layer and step).
float* attention_scratch(int64_t count) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(count)) scratch.resize(static_cast<size_t>(count));
  return scratch.data();
}

}  // namespace

// Norm, fused QKV product, biases, q/k norms, RoPE (the layer's own table), and K/V into the cache. Layer
// l's rows are [q | k | v] of its own sizes; a layer whose values are its keys computes [q | k] and copies
// k into v before the k norm; a layer that reads another's K/V computes q alone and writes nothing.
void CpuBackend::qkv_projection(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int num_tokens = batch.num_tokens();
  const int dim = config_.dim, hd = config_.head_dim_of(l), q_dim = config_.q_dim_of(l), kv_dim = config_.kv_dim_of(l);
  const int kv_heads = config_.kv_heads_of(l);
  const int q_proj = q_dim * (config_.attn_output_gate ? 2 : 1), qkv_dim = q_proj + 2 * kv_dim;
  const int rotary = config_.rotary_dims_of(config_.uses_local_rope(l));
  const bool writes = config_.writes_kv(l);
  const int64_t layer_offset = kv_slot_offset(l);
  const float* attn_norm = layer.vector(LayerTensor::kAttnNorm).data();
  const std::vector<float>& qkv_bias = layer.vector(LayerProduct::kQkvBias);
  const std::vector<float>& q_norm = layer.vector(LayerTensor::kQNorm);
  const std::vector<float>& k_norm = layer.vector(LayerTensor::kKNorm);
  if (!config_.post_norm) {  // pre-norm: the sublayer reads norm(x); post-norm: x itself
    pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) rmsnorm_row(&x_[r * dim], attn_norm, &h_[r * dim], dim, config_.rms_eps);
    }, 1, min_parallel_items(0.5 * dim));
  }
  const float* input = config_.post_norm ? x_.data() : h_.data();
  const PackedMatrix& qkv = layer.matrix(LayerProduct::kQkv);  // [q | k | v], [q | k] or q alone
  matmul(input, qkv, qkv_.data(), num_tokens, pool_);
  // Before the values copy the keys: an adapter on k then reaches v too, as in transformers.
  lora_.add(LoraProduct::kQkv, l, lora_groups_, input, dim, qkv_.data(), qkv.rows(), pool_);
  if (!writes) return rope_queries(num_tokens, l);
  if (config_.values_are_keys(l)) keys_as_values(num_tokens, q_dim, kv_dim);
  const int rope_set = config_.uses_local_rope(l) ? 1 : 0;
  const int32_t* slots = batch.slots(kv_groups_.layer_group[static_cast<size_t>(l)]);  // the layer's group's pages
  for (int r = 0; r < num_tokens; ++r) {
    float* q = &qkv_[static_cast<int64_t>(r) * qkv_dim];
    float* k = q + q_proj;  // the k rows follow the q projection's (with the gate: 2 * q_dim of them)
    if (!qkv_bias.empty()) {
      for (int i = 0; i < qkv_dim; ++i) q[i] += qkv_bias[i];
    }
    if (config_.attn_output_gate) split_output_gate(q, r);
    if (config_.qk_norm_whole) {  // OLMoE: one norm over all of q, one over all of k
      rmsnorm_row(q, q_norm.data(), q, q_dim, config_.rms_eps);
      rmsnorm_row(k, k_norm.data(), k, kv_dim, config_.rms_eps);
    } else if (!q_norm.empty()) {
      for (int h = 0; h < config_.num_heads; ++h) rmsnorm_row(q + h * hd, q_norm.data(), q + h * hd, hd, config_.rms_eps);
      for (int h = 0; h < kv_heads; ++h) rmsnorm_row(k + h * hd, k_norm.data(), k + h * hd, hd, config_.rms_eps);
    }
    for (int h = 0; h < kv_heads && config_.value_norm; ++h) rmsnorm_row(k + kv_dim + h * hd, nullptr, k + kv_dim + h * hd, hd, config_.rms_eps);
    const float* c = &rope_cos_[rope_set][r * rotary / 2];
    const float* s = &rope_sin_[rope_set][r * rotary / 2];
    const bool rotates = !config_.learned_positions && !config_.is_nope(l);  // NoPE layers keep q and k as they are
    for (int h = 0; h < config_.num_heads && rotates; ++h) rope_head(q + h * hd, rotary, c, s, config_.rope_layout);
    for (int h = 0; h < kv_heads && rotates; ++h) rope_head(k + h * hd, rotary, c, s, config_.rope_layout);
    const int32_t slot = slots[r];
    if (slot < 0) continue;
    store_kv(k, kv_dim, layer_offset, slot);
  }
}

// A layer that reads another layer's K/V: its q heads normed and rotated, nothing cached (Gemma 4).
void CpuBackend::rope_queries(int num_tokens, int l) {
  const int hd = config_.head_dim_of(l), q_dim = config_.q_dim_of(l);
  const int rope_set = config_.uses_local_rope(l) ? 1 : 0;
  const std::vector<float>& q_norm = weights_.layers[static_cast<size_t>(l)].vector(LayerTensor::kQNorm);
  for (int r = 0; r < num_tokens; ++r) {
    float* q = &qkv_[static_cast<int64_t>(r) * q_dim];
    for (int h = 0; h < config_.num_heads && !q_norm.empty(); ++h) rmsnorm_row(q + h * hd, q_norm.data(), q + h * hd, hd, config_.rms_eps);
    const int rotary = config_.rotary_dims_of(rope_set == 1);
    const float* c = &rope_cos_[rope_set][r * rotary / 2];
    const float* s = &rope_sin_[rope_set][r * rotary / 2];
    for (int h = 0; h < config_.num_heads; ++h) rope_head(q + h * hd, rotary, c, s, config_.rope_layout);
  }
}

// [q | k] rows of stride q_dim + kv_dim spread to [q | k | v = k] rows of stride q_dim + 2 kv_dim, from the
// last row down (each row moves up, past nothing not yet moved).
void CpuBackend::keys_as_values(int num_tokens, int q_dim, int kv_dim) {
  const int64_t from = q_dim + kv_dim, to = q_dim + 2 * kv_dim;
  for (int64_t r = num_tokens - 1; r >= 0; --r) {
    float* src = &qkv_[r * from];
    float* dst = &qkv_[r * to];
    std::copy_backward(src, src + from, dst + from);
    std::copy_n(dst + q_dim, kv_dim, dst + q_dim + kv_dim);
  }
}

int64_t CpuBackend::kv_slot_offset(int l) const {
  return static_cast<int64_t>(kv_groups_.layer_slot[static_cast<size_t>(l)]) * spec_.num_blocks * spec_.block_size *
         kv_groups_.slot_values;
}

const int32_t* CpuBackend::row_block_table(const RaggedBatch& batch, int l, int64_t r, int first_key) const {
  const int32_t* table = batch.block_table(kv_groups_.layer_group[static_cast<size_t>(l)], row_seq_[r]);
  // A windowed group's freed blocks are -1, and a prefix of the table: the first block read must be a page.
  if (table[first_key / spec_.block_size] < 0) {
    throw Error("internal error: layer " + std::to_string(l) + " row " + std::to_string(r) + " would read block " +
                std::to_string(first_key / spec_.block_size) + ", freed from its KV group's table");
  }
  return table;
}

// Qwen3.5's q rows hold per head [q | gate]: the gates go to att_gate_'s row, the q heads close up into the
// row's first q_dim values (head h moves down from 2 h head_dim, past what heads before it read).
void CpuBackend::split_output_gate(float* q, int64_t r) {
  const int hd = config_.head_dim;  // (no family has both the gate and per-layer head sizes)
  float* gate = &att_gate_[r * config_.q_dim()];
  for (int h = 0; h < config_.num_heads; ++h) {
    std::copy_n(q + (2 * h + 1) * hd, hd, gate + h * hd);
    if (h > 0) std::copy_n(q + 2 * h * hd, hd, q + h * hd);
  }
}

// The attention output times sigmoid(gate), before the output projection.
void CpuBackend::apply_output_gate(int num_tokens) {
  const size_t n = static_cast<size_t>(num_tokens) * config_.q_dim();
  for (size_t i = 0; i < n; ++i) att_[i] *= 1.0f / (1.0f + std::exp(-att_gate_[i]));
}

// One row's K and V (kv_dim each, end to end at kv) into the cache at slot of the layer at layer_offset
// (elements): V as the slot's row, K spread over its block's element rows (k_cache_index).
void CpuBackend::store_kv(const float* kv, int kv_dim, int64_t layer_offset, int32_t slot) {
  // kv_dim values of K and of V into a cache slot slot_values wide (a narrower layer: the first kv_dim).
  const int bs = spec_.block_size, stride = kv_groups_.slot_values;
  const int64_t v_at = layer_offset + static_cast<int64_t>(slot) * stride;
  if (kv_element_ == KvElement::kBf16) {
    auto* k = reinterpret_cast<uint16_t*>(k_cache_.get()) + layer_offset;
    auto* v = reinterpret_cast<uint16_t*>(v_cache_.get()) + v_at;
    for (int i = 0; i < kv_dim; ++i) k[k_cache_index(slot, i, stride, bs)] = f32_to_bf16(kv[i]);
    for (int i = 0; i < kv_dim; ++i) v[i] = f32_to_bf16(kv[kv_dim + i]);
  } else {
    auto* k = reinterpret_cast<float*>(k_cache_.get()) + layer_offset;
    for (int i = 0; i < kv_dim; ++i) k[k_cache_index(slot, i, stride, bs)] = kv[i];
    std::copy_n(kv + kv_dim, kv_dim, reinterpret_cast<float*>(v_cache_.get()) + v_at);
  }
}

void CpuBackend::attention_layer(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int num_tokens = batch.num_tokens();
  const int hd = config_.head_dim_of(l), q_dim = config_.q_dim_of(l), kv_dim = config_.kv_dim_of(l);
  // A row's stride in qkv_: [q (gate) | k | v], or q alone where the layer reads another's K/V.
  const int qkv_dim = config_.writes_kv(l) ? q_dim * (config_.attn_output_gate ? 2 : 1) + 2 * kv_dim : q_dim;
  const int64_t layer_offset = kv_slot_offset(l);
  qkv_projection(batch, l);
  const int element_bytes = kv_element_bytes(kv_element_);
  // The cache slot's stride is slot_values (every slot as wide as the widest layer's K/V); this layer's
  // heads are its first kv_dim.
  const PagedKv cache{k_cache_.get() + layer_offset * element_bytes, v_cache_.get() + layer_offset * element_bytes,
                      kv_groups_.slot_values, spec_.block_size, kv_element_};
  const std::vector<float>& sinks = layer.vector(LayerTensor::kSinks);
  const AttentionParams params{hd, config_.query_scale(), config_.attn_softcap, config_.window(l),
                               sinks.empty() ? nullptr : sinks.data()};
  const int num_heads = config_.num_heads, num_kv_heads = config_.kv_heads_of(l);
  const int group = num_heads / num_kv_heads;
  auto table_of = [&](int64_t r) {
    return row_block_table(batch, l, r, params.first_key(attention_extent(batch, r)));
  };
  // One-core cost of a head at most: per position a q.k and a p v (~0.25 ns per element each) and an exp.
  const double head_ns = (0.5 * hd + 10.0) * batch.max_seq_len;
  if (pool_.num_threads() == 1 || num_tokens >= 2 * pool_.num_threads()) {
    // Enough rows for every thread: a row's heads together, and up to kMaxAttendRows rows of one sequence
    // (a prompt chunk's) together, each K/V row of their contexts read once for them.
    pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
      float* scratch = attention_scratch(kMaxAttendRows * attend_row_scratch(num_heads, batch.max_seq_len));
      int pos[kMaxAttendRows];
      for (int64_t r = begin; r < end;) {
        int count = 0;
        do {
          pos[count] = attention_extent(batch, r + count);
          ++count;
        } while (count < kMaxAttendRows && r + count < end && row_seq_[r + count] == row_seq_[r]);
        attend_rows(&qkv_[r * qkv_dim], qkv_dim, cache, table_of(r), pos, count, num_heads, num_kv_heads,
                    params, scratch, &att_[r * q_dim], q_dim);
        r += count;
      }
    }, 1, min_parallel_items(num_heads * head_ns));
  } else {  // few rows (a sequential decode): spread the heads over the threads (the same bits)
    pool_.parallel_for(static_cast<int64_t>(num_tokens) * num_heads, [&](int64_t begin, int64_t end) {
      float* scratch = attention_scratch(batch.max_seq_len + 1);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = i / num_heads;
        const int h = static_cast<int>(i % num_heads);
        attend_head(&qkv_[r * qkv_dim + h * hd], cache, table_of(r), attention_extent(batch, r), h / group, params,
                    scratch, &att_[r * q_dim + h * hd], params.sink(h));
      }
    }, 1, min_parallel_items(head_ns));
  }
  if (config_.attn_output_gate) apply_output_gate(num_tokens);
  matmul(att_.data(), layer.matrix(LayerTensor::kWo), delta_.data(), num_tokens, pool_);
  const std::vector<float>& o_bias = layer.vector(LayerTensor::kBo);
  if (!o_bias.empty()) {
    for (int64_t r = 0; r < num_tokens; ++r) {
      for (int i = 0; i < config_.dim; ++i) delta_[r * config_.dim + i] += o_bias[i];
    }
  }
  lora_.add(LoraProduct::kO, l, lora_groups_, att_.data(), q_dim, delta_.data(), config_.dim, pool_);
  add_sublayer_output(num_tokens, layer.vector(LayerTensor::kPostAttnNorm), layer.vector(LayerTensor::kAttnNorm),
                      layer.vector(LayerTensor::kAttnNormBias));
}

// h_ = the mixer's norm of x_ (a recurrent layer's input).
void CpuBackend::mixer_norm(int num_tokens, const CpuLayer& layer) {
  const int dim = config_.dim;
  const float* attn_norm = layer.vector(LayerTensor::kAttnNorm).data();
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rmsnorm_row(&x_[r * dim], attn_norm, &h_[r * dim], dim, config_.rms_eps);
  }, 1, min_parallel_items(0.5 * dim));
}

// x += delta, through the sublayer's output norm first where the family has one (Gemma's sandwich); with
// post_norm, x = norm(x + delta) by the sublayer's own norm (norm, norm_bias).
void CpuBackend::add_sublayer_output(int num_tokens, const std::vector<float>& post_norm,
                                     const std::vector<float>& norm, const std::vector<float>& norm_bias) {
  const int dim = config_.dim;
  if (!post_norm.empty()) {
    pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) rmsnorm_row(&delta_[r * dim], post_norm.data(), &delta_[r * dim], dim, config_.rms_eps);
    }, 1, min_parallel_items(0.5 * dim));
  }
  const size_t n = static_cast<size_t>(num_tokens) * dim;
  if (config_.residual_scale != 1.0f) {  // Granite's residual multiplier
    for (size_t i = 0; i < n; ++i) x_[i] += config_.residual_scale * delta_[i];
  } else {
    for (size_t i = 0; i < n; ++i) x_[i] += delta_[i];
  }
  if (!config_.post_norm) return;
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) norm_row(&x_[r * dim], norm, norm_bias, &x_[r * dim]);
  }, 1, min_parallel_items(0.5 * dim));
}

int CpuBackend::ffn_layer(int num_tokens, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int dim = config_.dim;
  if (config_.post_norm) {
    plain_ffn(num_tokens, l, x_.data());
    return 0;
  }
  const std::vector<float>& ffn_norm = layer.vector(LayerTensor::kFfnNorm);
  const std::vector<float>& ffn_norm_bias = layer.vector(LayerTensor::kFfnNormBias);
  const std::vector<float>& post_ffn_norm = layer.vector(LayerTensor::kPostFfnNorm);
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rmsnorm_row(&x_[r * dim], ffn_norm.data(), &h_[r * dim], dim, config_.rms_eps);
  }, 1, min_parallel_items(0.5 * dim));
  if (!layer.experts.empty() && config_.experts_beside_dense) {  // Gemma 4: the dense MLP, then the experts
    dense_ffn(num_tokens, l);
    const int touched = experts_beside_dense(num_tokens, l);
    add_sublayer_output(num_tokens, post_ffn_norm, ffn_norm, ffn_norm_bias);
    return touched;
  }
  if (!config_.gated_ffn) {  // a pre-norm plain FFN (Nemotron-H's relu^2 MLP)
    plain_ffn(num_tokens, l, h_.data());
    return 0;
  }
  if (!layer.experts.empty()) {  // a sparse layer
    const MoeRouting routing{config_.num_experts, config_.experts_per_token, config_.norm_topk_prob,
                             config_.moe_router};
    const int touched = moe_ffn(h_.data(), num_tokens, dim, layer, routing, glu_params(config_), pool_, moe_scratch_,
                                delta_.data());
    add_sublayer_output(num_tokens, post_ffn_norm, ffn_norm, ffn_norm_bias);
    return touched;
  }
  dense_ffn(num_tokens, l);
  add_sublayer_output(num_tokens, post_ffn_norm, ffn_norm, ffn_norm_bias);
  return 0;
}

// The gated FFN of h_ into delta_ (the layer's own width).
void CpuBackend::dense_ffn(int num_tokens, int l) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int dim = config_.dim, hidden = config_.hidden_of(l);
  matmul(h_.data(), layer.matrix(LayerProduct::kGateUp), gate_up_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kGateUp, l, lora_groups_, h_.data(), dim, gate_up_.data(), 2 * hidden, pool_);
  const GluParams glu = glu_params(config_);
  if (num_tokens == 1) {  // a decode step of one sequence: its columns split across the threads
    pool_.parallel_for(hidden, [&](int64_t begin, int64_t end) {
      gated_ffn_cols(&gate_up_[begin], &gate_up_[hidden + begin], &ff_[begin], static_cast<int>(end - begin), glu);
    }, 16, min_parallel_items(10.0));  // an exp or tanh per element
  } else {
    pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) gated_ffn_row(&gate_up_[r * 2 * hidden], &ff_[r * hidden], hidden, glu);
    }, 1, min_parallel_items(10.0 * hidden));
  }
  matmul(ff_.data(), layer.matrix(LayerTensor::kDown), delta_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kDown, l, lora_groups_, ff_.data(), hidden, delta_.data(), dim, pool_);
}

// A plain FFN of input (x_ with post-norm, else the normed h_): down(act(up input + b_up)) + b_down, then
// the residual add (post-norm: x = norm(x + that), BERT); without biases (Nemotron-H) relu^2 is the act.
void CpuBackend::plain_ffn(int num_tokens, int l, const float* input) {
  const CpuLayer& layer = weights_.layers[static_cast<size_t>(l)];
  const int dim = config_.dim, hidden = config_.hidden_dim;
  const std::vector<float>& up_bias = layer.vector(LayerTensor::kUpBias);
  const std::vector<float>& down_bias = layer.vector(LayerTensor::kDownBias);
  if (config_.gated_ffn || (config_.post_norm && up_bias.empty())) throw Error("internal error: a post-norm layer without a plain FFN");
  matmul(input, layer.matrix(LayerProduct::kGateUp), gate_up_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kGateUp, l, lora_groups_, input, dim, gate_up_.data(), hidden, pool_);  // up alone
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      plain_ffn_row(&gate_up_[r * hidden], up_bias.empty() ? nullptr : up_bias.data(), &ff_[r * hidden], hidden,
                    config_.activation);
    }
  }, 1, min_parallel_items(10.0 * hidden));
  matmul(ff_.data(), layer.matrix(LayerTensor::kDown), delta_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kDown, l, lora_groups_, ff_.data(), hidden, delta_.data(), dim, pool_);
  for (int64_t r = 0; r < num_tokens && !down_bias.empty(); ++r) {
    for (int i = 0; i < dim; ++i) delta_[r * dim + i] += down_bias[i];
  }
  add_sublayer_output(num_tokens, layer.vector(LayerTensor::kPostFfnNorm), layer.vector(LayerTensor::kFfnNorm),
                      layer.vector(LayerTensor::kFfnNormBias));
}

}  // namespace cbatch
