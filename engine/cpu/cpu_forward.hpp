// The CPU backend's state and the steps of its forward pass, shared by cpu_backend.cpp (construction, the KV
// cache, a step: embedding, the layers in turn, each by its kind, pooling and logits), cpu_layer_forward.cpp
// (attention and the FFN), cpu_deltanet.cpp (a gated DeltaNet layer), cpu_short_conv.cpp (LFM2's short
// conv) and cpu_mamba2.cpp (a Mamba-2 layer); cpu_recurrent.hpp holds what the recurrent kinds share. Weights: cpu_weights.hpp, read by
// kind of the tensor table; a hybrid model's recurrent state: cpu_state_cache.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_backend_options.hpp"
#include "engine/model/kv_groups.hpp"
#include "engine/model/model.hpp"
#include "engine/cpu/cpu_lora.hpp"
#include "engine/cpu/cpu_moe.hpp"
#include "engine/cpu/cpu_ops.hpp"
#include "engine/cpu/cpu_state_cache.hpp"
#include "engine/cpu/cpu_weights.hpp"
#include "engine/cpu/zeroed_bytes.hpp"

namespace cbatch {

class CpuBackend final : public Backend {
 public:
  // tensors: the model's weight views, dropped layer by layer once packed (the model's own or taken from it:
  // take_tensors).
  CpuBackend(const Model& model, ModelTensors tensors, const CpuBackendOptions& options);

  const BackendTraits& traits() const override { return traits_; }

  // The machine's copy bandwidth and this backend's fp32 matmul rate on a large product (cpu_peaks.hpp).
  DevicePeaks measure_peaks() override;

  // A block is one KV group's page: K and V of its layers' cache slots, each slot_values wide (kv_groups.hpp;
  // only attention layers that write K/V keep it).
  int64_t kv_block_bytes(int block_size) const override {
    return 2LL * kv_groups_.layers_per_page * block_size * kv_groups_.slot_values * kv_element_bytes(kv_element_);
  }
  // A hybrid model's cache memory is split in halves: K/V blocks and state slots.
  int64_t max_kv_blocks(int block_size) const override;
  int64_t state_slot_bytes() const override { return states_.slot_bytes(); }
  int64_t max_state_slots() const override;
  void allocate_kv_cache(const KvCacheSpec& spec) override;

  void forward(const RaggedBatch& batch, const StepRequest& request, StepResult& out) override;

 private:
  // cpu_backend.cpp: the step around the layers.
  void resize_activations(int num_tokens);
  void copy_blocks(const RaggedBatch& batch);
  void group_rows_by_adapter(const RaggedBatch& batch);
  void rope_tables(const RaggedBatch& batch);
  void embed_rows(const RaggedBatch& batch);
  int64_t position_row(const RaggedBatch& batch, int r) const;
  void compute_logits(const RaggedBatch& batch, const StepRequest& request, StepResult& out);
  BackendTraits make_traits() const;
  void head_rows(const int32_t* rows, int n, float* logits);
  // cpu_layer_forward.cpp: a layer.
  void mixer_layer(const RaggedBatch& batch, int layer);  // the layer's kind's mixer, its output added to x_
  void attention_layer(const RaggedBatch& batch, int layer);
  void qkv_projection(const RaggedBatch& batch, int layer);
  void split_output_gate(float* qkv_row, int64_t row);
  void apply_output_gate(int num_tokens);
  void store_kv(const float* kv, int kv_dim, int64_t layer_offset, int32_t slot);
  void keys_as_values(int num_tokens, int q_dim, int kv_dim);
  void rope_queries(int num_tokens, int layer);
  // cpu_per_layer_input.cpp: Gemma 4's per-layer inputs, and a layer's end (its input added, its scalar).
  void per_layer_inputs(const RaggedBatch& batch);
  void finish_layer(int num_tokens, int layer);
  // cpu_deltanet.cpp: a gated DeltaNet layer.
  void deltanet_layer(const RaggedBatch& batch, int layer);
  void deltanet_conv(const RaggedBatch& batch, int layer);
  void deltanet_gates(int num_tokens, const CpuLayer& layer);
  void deltanet_recurrence(const RaggedBatch& batch, int layer);
  void deltanet_gated_norm(int num_tokens, const CpuLayer& layer);
  // cpu_short_conv.cpp, cpu_mamba2.cpp: LFM2's short conv, a Mamba-2 layer.
  void short_conv_layer(const RaggedBatch& batch, int layer);
  void mamba2_layer(const RaggedBatch& batch, int layer);
  void mamba2_conv_and_dt(const RaggedBatch& batch, int layer);
  void mamba2_scan(const RaggedBatch& batch, int layer);
  void mamba2_gated_norm(int num_tokens, const CpuLayer& layer);
  void mixer_norm(int num_tokens, const CpuLayer& layer);  // h_ = norm(x_) by the layer's attn_norm
  int ffn_layer(int num_tokens, int layer);  // returns the experts the layer's rows picked (0: dense)
  void dense_ffn(int num_tokens, int layer);  // the gated FFN of h_ into delta_
  // cpu_experts_beside_dense.cpp: Gemma 4's experts added to the dense MLP's output in delta_.
  int experts_beside_dense(int num_tokens, int layer);
  void plain_ffn(int num_tokens, int l, const float* input);
  void add_sublayer_output(int num_tokens, const std::vector<float>& post_norm, const std::vector<float>& norm,
                           const std::vector<float>& norm_bias);
  // Both: the family's norm of one row (LayerNorm with bias, or RMSNorm; out may be x), the last cache
  // position row r attends (its own, or with bidirectional attention its sequence's last).
  void norm_row(const float* x, const std::vector<float>& weight, const std::vector<float>& bias, float* out) const;
  int attention_extent(const RaggedBatch& batch, int64_t row) const;
  int64_t kv_slot_offset(int layer) const;  // elements before the layer's cache slot in k_cache_ and v_cache_
  // Row r's block table in the layer's KV group; throws when the first block its window reads was freed.
  const int32_t* row_block_table(const RaggedBatch& batch, int layer, int64_t r, int first_key) const;

  ModelConfig config_;
  CpuBackendOptions options_;
  ThreadPool pool_;
  std::shared_ptr<const void> storage_;  // keeps the bytes behind the weights' tables alive
  CpuWeights weights_;
  BackendTraits traits_;
  // RoPE tables: global or local layers (Gemma 3's own base), positions below or from longrope's
  // original_max_position. Sets a model does not use are computed anyway (cheap) and never read.
  static constexpr int kLocal = 1, kLongRange = 2, kRopeSets = 4;
  std::vector<float> inv_freq_[kRopeSets];  // (rotary_dims_of(local) / 2) each

  KvCacheSpec spec_;
  KvGroups kv_groups_;             // which layers keep which K/V: a layer's group and cache slot
  KvElement kv_element_ = KvElement::kF32;
  // Elements of kv_element_: K (layers_per_page, num_blocks, slot_values, block_size), V (layers_per_page,
  // num_blocks * block_size, slot_values) (PagedKv, slot_values = kv_groups_.slot_values): layer l's K/V live
  // in cache slot kv_groups_.layer_slot[l] (a shared layer: its source's), its first kv_dim_of(l) values,
  // in the pages of its group's block table.
  ZeroedBytes k_cache_;
  ZeroedBytes v_cache_;
  CpuStateCache states_;           // a hybrid model's recurrent state slots (empty otherwise)

  // Activations, resized to the batch: T = rows of the batch.
  std::vector<float> x_;           // (T, dim) residual stream
  std::vector<float> h_;           // (T, dim) normalized input of a sublayer
  // Per layer l (its own sizes, up to the largest layer's): q_dim = q_dim_of(l), kv_dim = kv_dim_of(l).
  std::vector<float> qkv_;         // (T, q_proj_dim + 2 * kv_dim); with the output gate q is compacted to the first q_dim
  std::vector<float> att_gate_;    // (T, q_dim) the attention output gate's logits (attn_output_gate)
  std::vector<float> att_;         // (T, q_dim)
  std::vector<float> gate_up_;     // (T, 2 * hidden_of(l))
  std::vector<float> ff_;          // (T, hidden_of(l)), or (T, per_layer_dim)
  std::vector<float> per_layer_in_;   // (T, num_layers * per_layer_dim) Gemma 4's per-layer inputs
  std::vector<float> per_layer_tok_;  // (T, num_layers * per_layer_dim) their table rows
  std::vector<float> delta_;       // (T, dim) sublayer output before the residual add
  std::vector<float> rope_cos_[2];  // (T, rotary_dims_of(local) / 2) of global and of local layers
  std::vector<float> rope_sin_[2];  // (T, rotary_dims_of(local) / 2)
  std::vector<float> ssm_proj_;    // (T, conv_dim + value_dim) a DeltaNet's [q|k|v | z]; a short conv's [B | C | x]
  std::vector<float> ssm_ba_;      // (T, 2 * num_v_heads) its [b | a]
  std::vector<float> ssm_conv_;    // (T, conv_dim) the conv's output; q and k L2-normed per head (q scaled);
                                   // a short conv's (T, dim) B * x, then C * conv
  std::vector<float> ssm_gates_;   // (T, 2 * num_v_heads) per value head beta, then the decay factor exp(g)
  std::vector<float> ssm_core_;    // (T, value_dim) the delta rule's output, then gated-normed
  std::vector<float> mamba_proj_;  // (T, in_proj_dim) a Mamba-2's [z | x|B|C | dt], then x|B|C after the conv (SiLU)
  std::vector<float> mamba_dt_;    // (T, num_heads) dt = softplus(dt + dt_bias), clamped
  std::vector<float> mamba_y_;     // (T, inner) the scan's output, then gated-normed
  std::vector<int32_t> row_seq_;   // (T) sequence of each row
  MoeScratch moe_scratch_;         // sparse layers' routing and per-expert buffers
  std::vector<float> moe_route_;   // (T, dim) Gemma 4's router input
  std::vector<float> moe_out_;     // (T, dim) its experts' output
  CpuLoraSet lora_;                // the LoRA adapters' packed pairs
  std::vector<int32_t> row_lora_;  // (T) adapter of each row, 0 = none
  std::vector<LoraGroup> lora_groups_;  // the step's rows grouped by adapter
};

}  // namespace cbatch
