// A step of the CUDA backend (cuda_forward.hpp): the batch's indices on the device, the decode plan, the
// embedding, then each layer: norm, QKV, RoPE and the cache write, attention (tiles of multi-row sequences,
// the decode kernel for single-row ones; Qwen3.5's output gate), o, or a recurrent layer's mixer
// (step_recurrent.cpp), then norm, and the gated or plain (relu^2) FFN or the sparse layer's experts, then
// Gemma 4's layer tail (step_per_layer.cpp); Nemotron-H's layers have the mixer or the FFN alone.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/decode_stream.hpp"
#include "cuda/attention/output_gate.hpp"
#include "cuda/attention/paged_attention.hpp"
#include "cuda/attention/prefill_attention.hpp"
#include "cuda/attention/rope_kv_cache.hpp"
#include "cuda/backend/cuda_forward.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/elementwise/embedding.hpp"
#include "cuda/elementwise/rmsnorm.hpp"
#include "cuda/elementwise/swiglu.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

template <typename T>
void CudaBackend<T>::forward(const RaggedBatch& batch, const StepRequest& request, StepResult& out) {
  out.logits.clear();
  out.token_ids.clear();
  if (shape_.num_blocks == 0) throw Error("CUDA backend: forward() before allocate_kv_cache()");
  if (batch.num_tokens() == 0) return;
  validate_batch(batch, limits(shape_.block_size, shape_.num_blocks));
  context_.make_current();
  const cudaStream_t stream = context_.stream();
  copy_blocks(batch, stream);
  prepare_states(batch, stream);
  try {
    profiler_.begin_step(stream, batch.num_tokens() == batch.num_seqs());
    const BatchIndices idx = uploader_.upload(batch, paged_attention_rows_per_tile(shape_), decode_kernel_.has_value(),
                                               stream, windows_);
    profiler_.phase("upload", stream);
    plan_decode(batch, idx);
    embedding<T>(workspace_.x.get(), weights_.embedding(), idx.tokens, batch.num_tokens(), config_.dim, stream,
                 config_.embedding_scale);
    profiler_.phase("embedding", stream);
    run_per_layer_inputs(idx, batch.num_tokens());
    experts_touched_ = 0;
    for (int layer = 0; layer < config_.num_layers; ++layer) run_layer(layer, batch, idx);
    run_head(batch, idx, request, out);  // synchronizes: the offsets of the layers that did not wait are on the host
    out.experts_touched = config_.is_moe() ? experts_touched_ + moe_.take_touched() : -1;
  } catch (...) {
    cudaStreamSynchronize(stream);  // drain what was enqueued: the next step rewrites the pinned indices
    moe_.take_touched();
    throw;
  }
}

// The decode rows' split-KV for this step, per window kind (a windowed row splits its window's keys),
// and the stream kernel's plan: as many warps as run at once, each with a few tiles.
template <typename T>
void CudaBackend<T>::plan_decode(const RaggedBatch& batch, const BatchIndices& idx) {
  for (size_t k = 0; k < windows_.size(); ++k) {
    const int keys = windows_[k] > 0 ? std::min(batch.max_seq_len, windows_[k]) : batch.max_seq_len;
    decode_split_[k] = choose_decode_split(idx.num_decode, config_.num_kv_heads, keys, 4 * num_sms(), max_partials());
  }
  if constexpr (!std::is_same_v<T, float>) {  // fp32 never takes the stream kernel (decode_kernel_choice)
    if (decode_kernel_ != DecodeKernel::kStream) return;
    if (!stream_limits_) {
      stream_limits_ = options_.fp8_kv_cache ? decode_stream_limits<T, Fp8E4M3>(config_.head_dim)
                                             : decode_stream_limits<T>(config_.head_dim);
    }
    const int max_warps = std::min(stream_limits_->max_warps, max_partials() / 2);
    for (size_t k = 0; k < windows_.size(); ++k) {
      DecodeStream& plan = decode_stream_[k];
      plan.tile_start = idx.decode_tile_start[k];
      plan.num_tiles = static_cast<int64_t>(idx.decode_tiles[k]) * config_.num_kv_heads;
      plan.stages = stream_limits_->stages;
      plan.num_warps = decode_stream::choose_num_warps(plan.num_tiles, max_warps);
    }
  }
}

// What the layer's RoPE step adds (rope_kv_cache.hpp): biases, q/k norms, and for global layers the
// longrope table and the yarn/longrope attention factor.
template <typename T>
RopeFamily CudaBackend<T>::rope_family(int layer) const {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  const bool local = config_.uses_local_rope(layer);
  RopeFamily f;
  f.qkv_bias = w.vector(LayerProduct::kQkvBias);  // null when absent
  f.q_norm = w.vector(LayerTensor::kQNorm);
  f.k_norm = w.vector(LayerTensor::kKNorm);
  f.qk_norm_whole = config_.qk_norm_whole;
  f.norm_eps = config_.rms_eps;
  if (config_.rope_scaling.type == RopeScalingType::kLongrope && !local) {  // local layers are unscaled
    f.long_inv_freq = weights_.rope_table(kRopeGlobal | kRopeLongRange);
    f.long_from = config_.rope_scaling.original_max_position;
  }
  f.attention_factor = rope_attention_factor(config_, local);
  f.rotates = !config_.is_nope(layer);
  f.value_norm = config_.value_norm;
  f.stores_kv = config_.writes_kv(layer);
  const int rotary = config_.rotary_dims_of(local);  // as the CPU's: a global layer of Gemma 4 rotates its head
  if (rotary != config_.head_dim_of(layer)) f.rotary_half = rotary / 2;
  return f;
}

// A layer: its mixer (attention or a recurrent kind), then its FFN, each behind the norm that adds the
// sublayer output before it to the residual stream (times Granite's residual multiplier; 1 elsewhere).
// Nemotron-H's layers have one of the two (has_mixer, has_ffn); the delta pending at a norm is then the
// last sublayer's of the layer before, with that sublayer's sandwich norm and bias (sublayer_out); none when
// the layer before added its own outputs (Gemma 4's layer tail: adds_own_output).
template <typename T>
void CudaBackend<T>::run_layer(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int n = batch.num_tokens();
  const int dim = config_.dim;
  const float eps = config_.rms_eps;
  const bool adds_delta = layer > 0 && !adds_own_output();
  const T* pending = adds_delta ? ws.delta.get() : nullptr;  // the previous sublayer's output
  SublayerOut before = adds_delta ? sublayer_out(layer - 1, config_.has_ffn(layer - 1)) : SublayerOut{};
  if (config_.has_mixer(layer)) {
    rmsnorm_residual<T>(ws.h.get(), ws.x.get(), pending, w.vector(LayerTensor::kAttnNorm), n, dim, eps, stream,
                        before.post_norm, before.bias, config_.residual_scale);
    profiler_.phase("norm", stream);
    if (config_.is_attention(layer)) {
      run_attention_mixer(layer, batch, idx);
    } else {
      run_recurrent(layer, batch, idx);
    }
    pending = ws.delta.get();
    before = sublayer_out(layer, false);
  }
  if (!config_.has_ffn(layer)) return;
  rmsnorm_residual<T>(ws.h.get(), ws.x.get(), pending, w.vector(LayerTensor::kFfnNorm), n, dim, eps, stream,
                      before.post_norm, before.bias, config_.residual_scale);
  profiler_.phase("norm", stream);
  run_ffn(layer, idx, n);
  if (adds_own_output()) finish_layer(layer, n);
}

// Attention as a layer's mixer: QKV (Qwen3.5's output gate split off), RoPE and the cache write, attention,
// o; its output left in the workspace's delta.
template <typename T>
void CudaBackend<T>::run_attention_mixer(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int n = batch.num_tokens(), dim = config_.dim;
  const int q_dim = config_.q_dim_of(layer), qkv_dim = q_dim + 2 * config_.kv_dim_of(layer);  // the layer's own
  if (config_.attn_output_gate) {  // Qwen3.5: each q head's rows followed by its gate's
    linear_.forward(w.linear[LayerProduct::kQkv], ws.gated_qkv.get(), ws.h.get(), n);
    add_lora(LoraProduct::kQkv, layer, idx, ws.h.get(), dim, ws.gated_qkv.get(), config_.q_proj_dim() + 2 * config_.kv_dim());
    split_output_gate<T>(ws.qkv.get(), ws.attn_gate.get(), ws.gated_qkv.get(), n, config_.num_heads,
                         config_.head_dim, config_.kv_dim(), stream);
  } else if (!config_.writes_kv(layer)) {  // Gemma 4's shared layer: q alone, into the rows' q part
    linear_.forward(w.linear[LayerProduct::kQkv], ws.attn.get(), ws.h.get(), n);
    add_lora(LoraProduct::kQkv, layer, idx, ws.h.get(), dim, ws.attn.get(), q_dim);
    const size_t q_bytes = sizeof(T) * q_dim;
    CUDA_CHECK(cudaMemcpy2DAsync(ws.qkv.get(), sizeof(T) * qkv_dim, ws.attn.get(), q_bytes, q_bytes, n,
                                 cudaMemcpyDeviceToDevice, stream));
  } else {  // (a layer whose values are its keys has its k rows uploaded twice: device_weights.cpp)
    linear_.forward(w.linear[LayerProduct::kQkv], ws.qkv.get(), ws.h.get(), n);
    add_lora(LoraProduct::kQkv, layer, idx, ws.h.get(), dim, ws.qkv.get(), qkv_dim);
  }
  profiler_.phase("gemm_qkv", stream);
  with_kv_type([&](auto kv) { run_attention<typename decltype(kv)::type>(layer, batch, idx); });
  if (config_.attn_output_gate) apply_output_gate<T>(ws.attn.get(), ws.attn_gate.get(), n, config_.q_dim(), stream);
  linear_.forward(w.linear[LayerTensor::kWo], ws.delta.get(), ws.attn.get(), n);
  add_lora(LoraProduct::kO, layer, idx, ws.attn.get(), q_dim, ws.delta.get(), dim);
  profiler_.phase("gemm_o", stream);
}

// A layer's FFN on the normed rows h: the sparse layer's experts, the gated FFN (with Gemma 4's experts
// beside it), or a plain one (relu^2, Nemotron-H's MLP: its up projection alone under kGateUp); its output
// left in the workspace's delta.
template <typename T>
void CudaBackend<T>::run_ffn(int layer, const BatchIndices& idx, int n) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int hidden = config_.hidden_of(layer);
  if (config_.experts_beside_dense) {
    run_dense_ffn(layer, idx, n);
    run_experts_beside_dense(layer, n);
  } else if (config_.is_sparse(layer)) {
    experts_touched_ += moe_.forward(w, ws.h.get(), n, ws.delta.get(), context_, profiler_);
  } else if (!config_.gated_ffn) {  // backend_checks.cpp admits relu^2 without biases only
    linear_.forward(w.linear[LayerProduct::kGateUp], ws.gate_up.get(), ws.h.get(), n);  // (n, hidden): up
    add_lora(LoraProduct::kGateUp, layer, idx, ws.h.get(), config_.dim, ws.gate_up.get(), hidden);
    profiler_.phase("gemm_gate_up", stream);
    relu_squared<T>(ws.ffn.get(), ws.gate_up.get(), static_cast<size_t>(n) * hidden, stream);
    profiler_.phase("swiglu", stream);
    linear_.forward(w.linear[LayerTensor::kDown], ws.delta.get(), ws.ffn.get(), n);
    add_lora(LoraProduct::kDown, layer, idx, ws.ffn.get(), hidden, ws.delta.get(), config_.dim);
    profiler_.phase("gemm_down", stream);
  } else {
    run_dense_ffn(layer, idx, n);
  }
}

// The gated FFN of h into delta, at the layer's own width (Gemma 4's shared layers: double wide).
template <typename T>
void CudaBackend<T>::run_dense_ffn(int layer, const BatchIndices& idx, int n) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int dim = config_.dim, hidden = config_.hidden_of(layer);
  linear_.forward(w.linear[LayerProduct::kGateUp], ws.gate_up.get(), ws.h.get(), n);
  add_lora(LoraProduct::kGateUp, layer, idx, ws.h.get(), dim, ws.gate_up.get(), 2 * hidden);
  profiler_.phase("gemm_gate_up", stream);
  swiglu<T>(ws.ffn.get(), ws.gate_up.get(), n, hidden, stream, config_.activation,
            GatedParams{config_.swiglu_limit, config_.swiglu_alpha});
  profiler_.phase("swiglu", stream);
  linear_.forward(w.linear[LayerTensor::kDown], ws.delta.get(), ws.ffn.get(), n);
  add_lora(LoraProduct::kDown, layer, idx, ws.ffn.get(), hidden, ws.delta.get(), dim);
  profiler_.phase("gemm_down", stream);
}

// The layer's RoPE and cache write, then the attention of its rows over a cache of KV elements, in the layer's
// own shape (layer_shape).
template <typename T>
template <typename KV>
void CudaBackend<T>::run_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int kind = window_kind(layer);
  const int group = kv_groups_.layer_group[static_cast<size_t>(layer)];  // its slots and block tables
  const AttentionShape shape = layer_shape(layer);
  rope_kv_cache<T, KV>(ws.qkv.get(), k_cache<KV>(layer), v_cache<KV>(layer), idx.positions, idx.group_slots(group),
                       rope_table(layer), batch.num_tokens(), shape, config_.rope_layout == RopeLayout::kHalves,
                       stream, rope_family(layer), kv_scales(layer));
  profiler_.phase("rope_kv", stream);
  const bool decode_kernel = takes_decode_kernel(layer);
  run_tile_attention<KV>(layer, batch, idx, decode_kernel ? idx.num_tiles : idx.num_all_tiles);
  profiler_.phase("attn_tiles", stream);
  if (!decode_kernel) return;  // the decode rows' tiles were attended with the others
  decode_attention<T, KV>(ws.attn.get(), ws.qkv.get(), k_cache<KV>(layer), v_cache<KV>(layer), idx.positions,
                          idx.query_start, idx.group_tables(group), batch.max_blocks_per_seq, idx.decode_seqs, idx.num_decode,
                          decode_split_[kind], decode_partial_o_.get(), decode_partial_ml_.get(), max_partials(),
                          shape, stream, *decode_kernel_, &decode_stream_[kind], scoring(layer), kv_scales(layer));
  profiler_.phase("attn_decode", stream);
}

// Attention of the first num_tiles tiles: those of the sequences with several rows, or all of them (the decode
// rows' tiles come last; all sequences' when the decode kernel is off).
template <typename T>
template <typename KV>
void CudaBackend<T>::run_tile_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx, int num_tiles) {
  auto* attend = &paged_attention<T, KV>;  // the two launchers share one signature
  if constexpr (!std::is_same_v<T, float>) {
    if (takes_prefill_kernel(layer)) attend = &prefill_attention<T, KV>;
  }
  attend(workspace_.attn.get(), workspace_.qkv.get(), k_cache<KV>(layer), v_cache<KV>(layer), idx.positions,
         idx.query_start, idx.group_tables(kv_groups_.layer_group[static_cast<size_t>(layer)]), batch.max_blocks_per_seq,
         idx.tile_seq, idx.tile_row, num_tiles, layer_shape(layer), context_.stream(), scoring(layer), kv_scales(layer));
}

#define CBATCH_INSTANTIATE_STEP(T)                                                                            \
  template void CudaBackend<T>::forward(const RaggedBatch&, const StepRequest&, StepResult&);                 \
  template void CudaBackend<T>::plan_decode(const RaggedBatch&, const BatchIndices&);                         \
  template RopeFamily CudaBackend<T>::rope_family(int) const;                                                 \
  template void CudaBackend<T>::run_layer(int, const RaggedBatch&, const BatchIndices&);                     \
  template void CudaBackend<T>::run_attention_mixer(int, const RaggedBatch&, const BatchIndices&);           \
  template void CudaBackend<T>::run_ffn(int, const BatchIndices&, int);                                       \
  template void CudaBackend<T>::run_dense_ffn(int, const BatchIndices&, int);
CBATCH_INSTANTIATE_STEP(float)
CBATCH_INSTANTIATE_STEP(__nv_bfloat16)
CBATCH_INSTANTIATE_STEP(__half)
#undef CBATCH_INSTANTIATE_STEP

}  // namespace cbatch
