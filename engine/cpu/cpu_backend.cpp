// The CPU backend's step (cpu_forward.hpp): weights from the tensor table (cpu_weights.hpp), an fp32 or
// bf16 paged KV cache (PagedKv's layout per layer), and one forward pass over a RaggedBatch for every
// family, driven by ModelConfig's description: the rows' embeddings (scaled; encoders add learned
// positions and token types, then a norm), each layer's attention and FFN (cpu_layer_forward.cpp), then
// the final norm and logits, or pooled rows instead (encoders: cpu_pooling.hpp, through a cross-encoder's
// classification head when it has one). A hybrid model's layers mix by their kind (attention, or gated
// DeltaNet: cpu_deltanet.cpp, short conv: cpu_short_conv.cpp, Mamba-2: cpu_mamba2.cpp, over the state slots
// of cpu_state_cache.hpp; Nemotron-H's layers are a mixer or an FFN alone). Matrix products go through the
// batch-invariant matmul; everything else is per row, or per sequence in token order.
#include "engine/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_forward.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_peaks.hpp"
#include "engine/cpu/cpu_pooling.hpp"
#include "engine/cpu/cpu_rope.hpp"
#include "engine/cpu/logprob_queries.hpp"

namespace cbatch {
CpuBackend::CpuBackend(const Model& model, ModelTensors tensors, const CpuBackendOptions& options)
    : config_(model.config),
      options_(options),
      pool_(options.num_threads, kDecodeSpinNs),
      storage_(model.storage),
      weights_(load_cpu_weights(model.config, std::move(tensors),
                                {options.keep_blocks, options.int8_products, options.int8_planes}, pool_)),
      kv_groups_(kv_groups(model.config)),
      states_(model.config) {
  // auto: bf16 where K and V come out of 8-bit products (the activations are rounded already), else fp32
  const bool int8_qkv = !weights_.layers.empty() && weights_.layers.front().matrix(LayerProduct::kQkv).is_int8();
  kv_element_ = options.kv_element.value_or(int8_qkv ? KvElement::kBf16 : KvElement::kF32);
  if (options.loras) lora_ = CpuLoraSet(*options.loras, config_.num_layers, pool_);
  for (int set = 0; set < kRopeSets; ++set) {
    inv_freq_[set].resize(config_.rotary_dims_of(set & kLocal) / 2);
    rope_inv_freq(config_, inv_freq_[set].data(), set & kLocal, set & kLongRange);
  }
  traits_ = make_traits();
}

BackendTraits CpuBackend::make_traits() const {
  BackendTraits t;
  t.device_name = "cpu";
  t.answers_logprob_queries = true;
  t.pools_embeddings = true;
  // Bytes a step streams per matrix parameter (4 for fp32 panels, under 1 for blocked ones), routed experts
  // aside; a routed expert's as stored: its block type's (MXFP4 17/32, Q8_0 34/32) where the experts keep
  // their blocks, else 4 (fp32).
  if (weights_.matrix_params > 0) {
    t.weight_bytes_per_param = static_cast<double>(weights_.matrix_bytes) / static_cast<double>(weights_.matrix_params);
  }
  t.expert_bytes_per_param =
      weights_.expert_params > 0 ? weights_.expert_bytes / weights_.expert_params : t.weight_bytes_per_param;
  t.kv_bytes_per_elem = static_cast<double>(kv_element_bytes(kv_element_));
  t.weight_bytes = weights_.matrix_bytes + weights_.expert_matrix_bytes;
  t.runs_recurrent_layers = true;
  t.keeps_state_snapshots = true;
  return t;
}

DevicePeaks CpuBackend::measure_peaks() { return measure_cpu_peaks(pool_); }

int64_t CpuBackend::max_kv_blocks(int block_size) const {
  if (options_.kv_blocks_bytes > 0) return options_.kv_blocks_bytes / kv_block_bytes(block_size);
  const int64_t bytes = config_.has_recurrent_layers() ? options_.kv_cache_bytes / 2 : options_.kv_cache_bytes;
  return bytes / kv_block_bytes(block_size);
}

int64_t CpuBackend::max_state_slots() const {
  return config_.has_recurrent_layers() ? (options_.kv_cache_bytes / 2) / states_.slot_bytes() : 0;
}

void CpuBackend::allocate_kv_cache(const KvCacheSpec& spec) {
  spec_ = spec;
  const size_t n = static_cast<size_t>(kv_groups_.layers_per_page) * spec.num_blocks * spec.block_size * kv_groups_.slot_values;
  k_cache_ = calloc_bytes(n * kv_element_bytes(kv_element_), "KV cache");
  v_cache_ = calloc_bytes(n * kv_element_bytes(kv_element_), "KV cache");
  if (config_.has_recurrent_layers()) states_.allocate(spec.num_state_slots + spec.num_state_snapshots);
}

void CpuBackend::resize_activations(int num_tokens) {
  const size_t n = static_cast<size_t>(num_tokens);
  x_.resize(n * config_.dim);
  h_.resize(n * config_.dim);
  const size_t q_dim = static_cast<size_t>(config_.num_heads) * config_.max_head_dim();
  qkv_.resize(n * (q_dim * (config_.attn_output_gate ? 2 : 1) + 2 * config_.max_kv_dim()));
  att_.resize(n * q_dim);
  if (config_.attn_output_gate) att_gate_.resize(n * q_dim);
  gate_up_.resize(n * 2 * config_.max_hidden());
  ff_.resize(n * std::max(config_.max_hidden(), config_.per_layer_dim));
  delta_.resize(n * config_.dim);
  for (int set = 0; set < 2; ++set) {
    rope_cos_[set].resize(n * config_.rotary_dims_of(set == 1) / 2);
    rope_sin_[set].resize(n * config_.rotary_dims_of(set == 1) / 2);
  }
  row_seq_.resize(n);
  if (config_.has_recurrent_layers()) {
    const DeltaNetSizes& d = config_.deltanet;
    const Mamba2Sizes& m = config_.mamba;
    const size_t short_conv = config_.short_conv_kernel > 0 ? static_cast<size_t>(config_.dim) : 0;
    ssm_proj_.resize(n * std::max<size_t>(d.conv_dim() + d.value_dim(), 3 * short_conv));
    ssm_ba_.resize(n * 2 * d.num_v_heads);
    ssm_conv_.resize(n * std::max<size_t>(d.conv_dim(), short_conv));
    ssm_gates_.resize(n * 2 * d.num_v_heads);
    ssm_core_.resize(n * d.value_dim());
    mamba_proj_.resize(n * m.in_proj_dim());
    mamba_dt_.resize(n * m.num_heads);
    mamba_y_.resize(n * m.inner());
  }
}

// The residual stream's first value of every row: the token's embedding (scaled), plus its learned
// position and token type 0 and the embedding norm where the family has them.
void CpuBackend::embed_rows(const RaggedBatch& batch) {
  const int dim = config_.dim;
  const TensorView& embedding = weights_.tables[ModelTensor::kEmbedding];
  const TensorView& positions = weights_.tables[ModelTensor::kPositionEmbedding];
  const TensorView& types = weights_.tables[ModelTensor::kTokenTypeEmbedding];
  const int64_t num_types = types.empty() ? 0 : std::min<int64_t>(2, types.rows);  // types 0 and 1 at most
  const std::vector<float>& norm = weights_.vectors[ModelTensor::kEmbeddingNorm];
  std::vector<float> row(static_cast<size_t>(dim));  // (dim) a position's or a type's
  for (int r = 0; r < batch.num_tokens(); ++r) {
    const int32_t token = batch.token_ids[r];
    if (token < 0 || token >= config_.vocab_size) throw Error("token id " + std::to_string(token) + " outside the vocabulary");
    float* x = x_.data() + static_cast<int64_t>(r) * dim;
    tensor_rows_to_f32(embedding, token, 1, x);
    if (config_.embedding_scale != 1.0f) {
      for (int i = 0; i < dim; ++i) x[i] *= config_.embedding_scale;
    }
    if (!positions.empty()) {
      const int64_t position = position_row(batch, r);
      if (position >= positions.rows) throw Error("position " + std::to_string(batch.positions[r]) + " past the position table");
      tensor_rows_to_f32(positions, position, 1, row.data());
      for (int i = 0; i < dim; ++i) x[i] += row[i];
    }
    if (num_types > 0) {
      const int type = batch.token_type(row_seq_[r], r);
      if (type >= num_types) throw Error("token type " + std::to_string(type) + " past the model's token types");
      tensor_rows_to_f32(types, type, 1, row.data());
      for (int i = 0; i < dim; ++i) x[i] += row[i];
    }
    if (!norm.empty()) norm_row(x, norm, weights_.vectors[ModelTensor::kEmbeddingNormBias], x);
  }
}

// Row r's row of the position table: its position plus the offset, or XLM-R's count of the sequence's
// non-pad tokens up to it (a pad token takes row offset - 1). An encoder's sequence is whole in the step.
int64_t CpuBackend::position_row(const RaggedBatch& batch, int r) const {
  const int pad = config_.position_pad_id;
  if (pad < 0) return batch.positions[r] + config_.position_offset;
  if (batch.token_ids[r] == pad) return config_.position_offset - 1;
  const int begin = batch.query_start[row_seq_[r]];
  if (batch.positions[begin] != 0) throw Error("an encoder sequence must be computed whole in one step");
  int64_t non_pad = 0;
  for (int i = begin; i < r; ++i) non_pad += batch.token_ids[i] != pad;
  return non_pad + config_.position_offset;
}

void CpuBackend::norm_row(const float* x, const std::vector<float>& weight, const std::vector<float>& bias,
                          float* out) const {
  if (config_.layer_norm) {
    layernorm_row(x, weight.data(), bias.data(), out, config_.dim, config_.rms_eps);
  } else {
    rmsnorm_row(x, weight.data(), out, config_.dim, config_.rms_eps);
  }
}

int CpuBackend::attention_extent(const RaggedBatch& batch, int64_t row) const {
  return config_.bidirectional ? batch.seq_lens[row_seq_[row]] - 1 : batch.positions[row];
}

// Each row's RoPE cos and sin at its position, for global layers and (Gemma 3) local ones, with longrope's
// long-range set from original_max_position on and the yarn/longrope attention factor.
void CpuBackend::rope_tables(const RaggedBatch& batch) {
  const bool has_local = config_.rope_theta_local > 0.0f;
  const RopeScaling& scaling = config_.rope_scaling;
  for (int r = 0; r < batch.num_tokens() && !config_.learned_positions; ++r) {
    const int pos = batch.positions[r];
    const bool long_range = scaling.type == RopeScalingType::kLongrope && pos >= scaling.original_max_position;
    for (int set = 0; set < (has_local ? 2 : 1); ++set) {
      const int rotary = config_.rotary_dims_of(set == 1), half = rotary / 2;
      const std::vector<float>& inv_freq = inv_freq_[(set ? kLocal : 0) | (long_range ? kLongRange : 0)];
      float* c = &rope_cos_[set][r * half];
      float* s = &rope_sin_[set][r * half];
      rope_angles(pos, inv_freq.data(), rotary, c, s);
      const float factor = rope_attention_factor(config_, set == 1);
      for (int i = 0; factor != 1.0f && i < half; ++i) c[i] *= factor, s[i] *= factor;
    }
  }
}

void CpuBackend::forward(const RaggedBatch& batch, const StepRequest& request, StepResult& out) {
  const int num_tokens = batch.num_tokens();
  const size_t groups = static_cast<size_t>(kv_groups_.num_groups());
  if (batch.num_kv_groups != kv_groups_.num_groups() || batch.slot_mapping.size() != groups * num_tokens ||
      batch.block_tables.size() != groups * batch.num_seqs() * batch.max_blocks_per_seq) {
    throw Error("internal error: a batch of " + std::to_string(batch.num_kv_groups) + " KV groups' tables for a model of " +
                std::to_string(groups) + " (" + kv_groups_.describe() + ")");
  }
  resize_activations(num_tokens);
  copy_blocks(batch);
  for (int s = 0; s < batch.num_seqs(); ++s) {
    std::fill(row_seq_.begin() + batch.query_start[s], row_seq_.begin() + batch.query_start[s + 1], s);
  }
  states_.prepare(batch);
  group_rows_by_adapter(batch);
  embed_rows(batch);
  per_layer_inputs(batch);
  rope_tables(batch);
  int experts_touched = 0;
  for (int l = 0; l < config_.num_layers; ++l) {
    if (config_.has_mixer(l)) mixer_layer(batch, l);
    if (config_.has_ffn(l)) experts_touched += ffn_layer(num_tokens, l);
    finish_layer(num_tokens, l);
  }
  out.experts_touched = config_.is_moe() ? experts_touched : -1;
  const std::vector<float>& final_norm = weights_.vectors[ModelTensor::kFinalNorm];
  pool_rows(batch, x_.data(), config_.dim, final_norm.empty() ? nullptr : final_norm.data(), config_.rms_eps, out.pooled);
  if (config_.is_cross_encoder()) {
    const ByKind<ModelTensor, std::vector<float>>& v = weights_.vectors;
    const ClassifierHead head{v[ModelTensor::kPooler].data(), v[ModelTensor::kPoolerBias].data(),
                              v[ModelTensor::kClassifier].data(), v[ModelTensor::kClassifierBias].data(),
                              config_.num_labels};
    classify_rows(head, config_.dim, batch.num_pooled(), out.pooled);
  }
  compute_logits(batch, request, out);
}

// The layer's own kind of mixing over positions; a new kind is a case here and a file of its own.
void CpuBackend::mixer_layer(const RaggedBatch& batch, int l) {
  switch (config_.layer_kind(l)) {
    case LayerKind::kAttention: return attention_layer(batch, l);
    case LayerKind::kDeltaNet: return deltanet_layer(batch, l);
    case LayerKind::kShortConv: return short_conv_layer(batch, l);
    case LayerKind::kMamba2: return mamba2_layer(batch, l);
    case LayerKind::kMlp: return;
  }
}

void CpuBackend::group_rows_by_adapter(const RaggedBatch& batch) {
  lora_groups_.clear();
  if (batch.lora_ids.empty()) return;
  row_lora_.assign(static_cast<size_t>(batch.num_tokens()), 0);
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const int32_t id = batch.lora_ids[s];
    if (id < 0 || id > lora_.num_adapters()) throw Error("LoRA adapter id " + std::to_string(id) + " was never loaded");
    std::fill(row_lora_.begin() + batch.query_start[s], row_lora_.begin() + batch.query_start[s + 1], id);
  }
  lora_groups_ = group_lora_rows(row_lora_);
}

// Copy-on-write: every cache slot's K and V of each source block (one group's page) into its destination,
// before the step writes.
void CpuBackend::copy_blocks(const RaggedBatch& batch) {
  const size_t element_bytes = kv_element_bytes(kv_element_);
  for (int c = 0; c < batch.num_block_copies(); ++c) {
    const int32_t src = batch.block_copies[2 * c], dst = batch.block_copies[2 * c + 1];
    if (src < 0 || dst < 0 || src >= spec_.num_blocks || dst >= spec_.num_blocks) {
      throw Error("block copy " + std::to_string(src) + " -> " + std::to_string(dst) + " outside the KV cache");
    }
    for (int l = 0; l < kv_groups_.layers_per_page; ++l) {  // l: a cache slot, slot_values wide
      const size_t block_bytes = static_cast<size_t>(spec_.block_size) * kv_groups_.slot_values * element_bytes;
      for (uint8_t* cache : {k_cache_.get(), v_cache_.get()}) {
        uint8_t* layer = cache + static_cast<size_t>(l) * spec_.num_blocks * block_bytes;
        std::memcpy(layer + dst * block_bytes, layer + src * block_bytes, block_bytes);
      }
    }
  }
}

// The final norm and the head of batch rows rows[0..n) (n <= the batch's rows): (n, vocab) logits.
void CpuBackend::head_rows(const int32_t* rows, int n, float* logits) {
  const int dim = config_.dim;
  const std::vector<float>& final_norm = weights_.vectors[ModelTensor::kFinalNorm];
  for (int i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    rmsnorm_row(&x_[r * dim], final_norm.data(), &h_[static_cast<int64_t>(i) * dim], dim, config_.rms_eps);
  }
  matmul(h_.data(), weights_.matrices[ModelTensor::kLmHead], logits, n, pool_);
  if (config_.final_softcap > 0.0f) softcap_row(logits, n * config_.vocab_size, config_.final_softcap);
  if (config_.logit_divisor != 1.0f) {  // Granite's logits_scaling
    const int64_t count = static_cast<int64_t>(n) * config_.vocab_size;
    for (int64_t i = 0; i < count; ++i) logits[i] /= config_.logit_divisor;
  }
}

void CpuBackend::compute_logits(const RaggedBatch& batch, const StepRequest& request, StepResult& out) {
  const int n = batch.num_logits();
  if (!config_.has_lm_head) {
    if (n > 0) throw Error("internal error: logits asked of an encoder model");
    out.logits.clear();
    out.token_ids.clear();
    return;
  }
  const int vocab = config_.vocab_size;
  out.logits.resize(static_cast<size_t>(n) * vocab);
  head_rows(batch.logits_rows.data(), n, out.logits.data());
  if (!request.want_logits) {
    out.token_ids.resize(n);
    pool_.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out.token_ids[i] = first_argmax(&out.logits[static_cast<size_t>(i) * vocab], vocab);
    }, 1, min_parallel_items(0.2 * vocab));
  }
  if (request.logprob_queries.empty()) return;
  const LogitsHead head = [this](const int32_t* rows, int count, float* logits) { head_rows(rows, count, logits); };
  answer_logprob_queries(batch, vocab, head, pool_, request, out);
}

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(model, expect_tensors(model), options);
}

std::unique_ptr<Backend> make_cpu_backend(const Model& model, ModelTensors tensors, const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(model, std::move(tensors), options);
}

}  // namespace cbatch
