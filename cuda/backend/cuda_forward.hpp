// The CUDA backend's state and the steps of its forward pass: the class make_cuda_backend builds, shared by
// cuda_backend.cpp (construction checks, kernel choices, traits, the factory), kv_cache_memory.cpp (the KV
// cache: its size, allocation and block copies), step_forward.cpp (a step: its indices, the decode plan,
// the embedding and the layers) and step_head.cpp (the final norm, lm_head and what the step returns).
//
// One forward pass over ragged batches for every family of ModelConfig's description, with the weights in
// the compute dtype T (bf16, fp16 or fp32), an fp32 residual stream, fp32 softmax and logits, and a paged
// KV cache in T (or in FP8 E4M3 with --kv-cache-dtype fp8, kv_cache_dtype.hpp). Per layer: norm -> fused
// QKV GEMM -> (biases, q/k norms) RoPE + cache write -> paged attention (the layer's scale, softcap, window
// and sinks) -> wo GEMM -> residual add (of the o bias, and of the sandwich-normed output) + norm -> fused
// gate|up GEMM (the layer's own width) -> SwiGLU or GeGLU -> w_down GEMM (added to x by the next norm, or by
// Gemma 4's layer tail with its per-layer input and scalar: step_per_layer.cpp), or in a sparse layer the
// experts (moe_ffn.hpp); the final logits softcapped where the family does. Gemma 4's shared layers compute
// q alone and attend over their source layer's cache; its V norm is part of the RoPE step. Everything runs on the
// context's one stream; forward() synchronizes once, after the single device-to-host copy, plus once per
// sparse layer (its expert offsets reach the host for the GEMM shapes). Each file instantiates its members
// for T = float, __nv_bfloat16 and __half.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "cuda/attention/attention_shape.hpp"
#include "cuda/attention/attention_tiles.hpp"
#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/attention/rope_family.hpp"
#include "cuda/backend/backend_checks.hpp"
#include "cuda/backend/batch_indices.hpp"
#include "cuda/backend/cuda_backend_options.hpp"
#include "cuda/backend/device_peaks.hpp"
#include "cuda/backend/device_weights.hpp"
#include "cuda/backend/recurrent_states.hpp"
#include "cuda/backend/step_profiler.hpp"
#include "cuda/backend/workspace.hpp"
#include "cuda/common/cuda_context.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/gemm/linear.hpp"
#include "cuda/lora/lora_weights.hpp"
#include "cuda/moe/moe_ffn.hpp"
#include "cuda/sampling/device_logprobs.hpp"
#include "cuda/sampling/sampling_lists.hpp"
#include "engine/backend/backend.hpp"
#include "engine/model/kv_groups.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// (num_layers, 2) FP8 cache scales of 1.0 on the device (kv_cache_dtype.hpp).
DeviceBuffer<float> unit_kv_scales(int num_layers);  // kv_cache_memory.cpp
// K (and V) values of one token in one cache slot on the device: the groups' slot_values (the widest cached
// layer's kv_dim) rounded up to a multiple of every attention layer's head_dim, so that each layer sees its
// slot as (num_blocks, cache_heads, block_size, head_dim) with a whole cache_heads (kv_cache_memory.cpp).
int cache_slot_values(const ModelConfig& config, const KvGroups& groups);

template <typename T>
class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const CudaBackendOptions& options)
      : config_(checked_config(model.config)),
        options_(options),
        context_(options.device_index),
        weights_(upload_weights<T>(model, context_with_shared_memory().stream(), options.fp8_weights,
                                   options.kernels.quantized_experts, options.kernels.linear_blocks)),
        linear_(context_, options.fp8_weights, options.max_batch_tokens,
                std::max({config_.dim, config_.num_heads * config_.max_head_dim(), config_.max_hidden(),
                          config_.deltanet.value_dim(),
                          config_.mamba.inner(), config_.per_layer_dim}),
                weights_.max_block_elems(), weights_.max_block_out()),
        workspace_(config_, options.max_batch_tokens, options.max_num_seqs),
        recurrent_(config_, options.max_batch_tokens, options.max_num_seqs, options.kernels.chunked_deltanet),
        moe_(config_, options.max_batch_tokens, options.kernels.grouped_moe_gemm),
        shape_{config_.num_heads, config_.num_kv_heads, config_.head_dim, 0, 0},
        windows_(window_kinds(config_)),
        kv_groups_(kv_groups(config_)),
        decode_split_(windows_.size()),
        decode_stream_(windows_.size()),
        decode_partial_o_(static_cast<size_t>(max_partials()) * (config_.num_heads / config_.num_kv_heads) *
                          config_.head_dim),
        decode_partial_ml_(static_cast<size_t>(max_partials()) * (config_.num_heads / config_.num_kv_heads) * 2) {
    for (const LayerWeights<T>& w : weights_.layers) {
      for (const LinearWeight<T>& linear : w.linear.items) linear_.check(linear);
    }
    if (options.loras) {
      lora_ = LoraWeights<T>(lora_adapters_for_cuda(*options.loras, config_), config_.num_layers,
                             options.max_batch_tokens);
    }
    traits_ = make_traits();
  }

  const BackendTraits& traits() const override { return traits_; }

  // A block is one KV group's page: K and V of its layers (kv_groups.hpp), each slot_values_ wide a token.
  int64_t kv_block_bytes(int block_size) const override {
    return int64_t{2} * kv_groups_.layers_per_page * block_size * slot_values_ * kv_elem_bytes();
  }

  // kv_cache_memory.cpp: the KV cache and a hybrid model's state slots (one for each sequence a step may
  // hold and the prefix cache's snapshots, reserved before the blocks).
  int64_t max_kv_blocks(int block_size) const override;
  int64_t state_slot_bytes() const override { return recurrent_.num_layers > 0 ? recurrent_.slot_bytes() : 0; }
  int64_t max_state_slots() const override {
    return recurrent_.num_layers > 0 ? int64_t{options_.max_num_seqs} + options_.state_snapshots : 0;
  }
  void allocate_kv_cache(const KvCacheSpec& spec) override;
  // step_forward.cpp: a step.
  void forward(const RaggedBatch& batch, const StepRequest& request, StepResult& out) override;
  // With fp8 weights the compute ceiling is the FP8 GEMM's (the roofline then errs low: the lm_head and
  // attention run in T, slower).
  DevicePeaks measure_peaks() override {
    DevicePeaks peaks = measure_device_peaks<T>(context_);
    if (options_.fp8_weights) peaks.flops_per_s = measure_fp8_gemm_flops(context_);
    return peaks;
  }
  double device_busy_seconds() const override { return profiler_.busy_seconds(); }

 private:
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
  // The longest sequence the engine will run: the KV cache must hold at least one of these.
  int max_context() const { return std::max(options_.max_context > 0 ? options_.max_context : config_.max_context, 1); }
  // Block table width accepted from the engine: generous (the model's own limit too), it costs little.
  BatchLimits limits(int block_size, int num_blocks) const {
    const int table_context = std::max({options_.max_context, config_.max_context, 1});
    return BatchLimits{options_.max_batch_tokens, options_.max_num_seqs,
                       static_cast<int>(ceil_div(table_context, block_size)), config_.vocab_size, num_blocks,
                       block_size, lora_.num_adapters(), kv_groups_.windows()};
  }
  size_t layer_cache_elems() const {
    return static_cast<size_t>(shape_.num_blocks) * shape_.block_size * slot_values_;
  }
  // The layer's attention geometry (Gemma 4's global layers have their own head size and K/V heads): its cache
  // slot seen as (num_blocks, cache_heads, block_size, head_dim), and the step's tile list, cut for shape_.
  AttentionShape layer_shape(int layer) const {
    AttentionShape s = shape_;
    s.num_kv_heads = config_.kv_heads_of(layer);
    s.head_dim = config_.head_dim_of(layer);
    s.cache_heads = slot_values_ / s.head_dim;
    s.tile_rows = paged_attention_rows_per_tile(shape_);
    return s;
  }
  // The layers of shape_'s head size and K/V heads take the decode kernel for their single-row sequences (its
  // split, stream plan and scratch are sized for that shape); the others (Gemma 4's global layers: head_dim
  // 512 has no decode kernel) attend them in the tile kernel, the decode rows' tiles after the others.
  bool takes_decode_kernel(int layer) const {
    return decode_kernel_.has_value() && config_.head_dim_of(layer) == shape_.head_dim &&
           config_.kv_heads_of(layer) == shape_.num_kv_heads;
  }
  // The cache element: 1 byte (E4M3) with --kv-cache-dtype fp8, else T.
  int64_t kv_elem_bytes() const { return options_.fp8_kv_cache ? 1 : static_cast<int64_t>(sizeof(T)); }
  // The layer's K (part 0) or V (part 1) cache as elements of KV (uint8_t: its bytes, whatever the element):
  // its cache slot's, whose pages its KV group's block table names.
  template <typename KV>
  KV* layer_cache(int layer, int part) const {
    const size_t bytes = static_cast<size_t>(kv_elem_bytes()) * layer_cache_elems();
    const size_t slot = static_cast<size_t>(kv_groups_.layer_slot[static_cast<size_t>(layer)]);
    return reinterpret_cast<KV*>(kv_cache_.get() + (2 * slot + part) * bytes);
  }
  template <typename KV>
  KV* k_cache(int layer) const { return layer_cache<KV>(layer, 0); }
  template <typename KV>
  KV* v_cache(int layer) const { return layer_cache<KV>(layer, 1); }
  // The layer's FP8 cache scales (kv_cache_dtype.hpp; unused with a cache in T).
  KvScales kv_scales(int layer) const {
    return {kv_scales_.get() + 2 * static_cast<size_t>(layer), kv_scales_.get() + 2 * static_cast<size_t>(layer) + 1};
  }
  // Calls f(std::type_identity<KV>{}) with the cache element type (fp32 compute has no FP8 build).
  template <typename F>
  void with_kv_type(F&& f) const {
    if constexpr (!std::is_same_v<T, float>) {
      if (options_.fp8_kv_cache) return f(std::type_identity<Fp8E4M3>{});
    }
    f(std::type_identity<T>{});
  }

  // kv_cache_memory.cpp
  void copy_blocks(const RaggedBatch& batch, cudaStream_t stream);
  // step_forward.cpp: the layers.
  void plan_decode(const RaggedBatch& batch, const BatchIndices& idx);
  void run_layer(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  void run_attention_mixer(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  void run_ffn(int layer, const BatchIndices& idx, int n);
  void run_dense_ffn(int layer, const BatchIndices& idx, int n);
  template <typename KV>
  void run_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  template <typename KV>
  void run_tile_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx, int num_tiles);
  // step_per_layer.cpp: Gemma 4's per-layer inputs of the step's rows, and a layer's tail (its FFN output,
  // per-layer input and scalar into x).
  void run_per_layer_inputs(const BatchIndices& idx, int n);
  void finish_layer(int layer, int n);
  // Gemma 4's MoE block: with the dense MLP's output in delta, delta = post_norm_1(delta) +
  // post_norm_2(experts(pre_norm_2 x)), the router reading rmsnorm(x) * router_scale * dim^-1/2.
  void run_experts_beside_dense(int layer, int n);
  // A layer ends by adding its outputs to x itself (Gemma 4's per-layer inputs and layer scalars), so the
  // next norm (or the final one) adds no delta.
  bool adds_own_output() const { return config_.per_layer_dim > 0 || config_.layer_scalar; }
  // step_recurrent.cpp: a hybrid model's recurrent layers.
  void prepare_states(const RaggedBatch& batch, cudaStream_t stream);
  void run_recurrent(int layer, const RaggedBatch& batch, const BatchIndices& idx);  // by the layer's kind
  void run_deltanet(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  void run_short_conv(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  void run_mamba2(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  // The family's per-layer parameters: how the layer scores keys, what its RoPE step adds, the kind of its
  // window (index into windows_), and the sandwich norm of the output delta of the layer before it.
  AttentionScoring scoring(int layer) const {
    const float* sinks = weights_.layers[static_cast<size_t>(layer)].vector(LayerTensor::kSinks);  // null: none
    return AttentionScoring{config_.query_scale(), config_.attn_softcap, config_.window(layer), sinks};
  }
  RopeFamily rope_family(int layer) const;
  const float* rope_table(int layer) const {
    return weights_.rope_table(config_.uses_local_rope(layer) ? kRopeLocal : kRopeGlobal);
  }
  int window_kind(int layer) const {
    return static_cast<int>(std::find(windows_.begin(), windows_.end(), config_.window(layer)) - windows_.begin());
  }
  // What the next norm adds a sublayer's output delta with: its sandwich norm (Gemma's post-attention or
  // post-FFN norm) and bias (the o bias), each null when absent. The FFN's, or (ffn false) the mixer's.
  struct SublayerOut {
    const float* post_norm = nullptr;
    const float* bias = nullptr;
  };
  SublayerOut sublayer_out(int layer, bool ffn) const {
    const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
    return ffn ? SublayerOut{w.vector(LayerTensor::kPostFfnNorm), nullptr}
               : SublayerOut{w.vector(LayerTensor::kPostAttnNorm), w.vector(LayerTensor::kBo)};
  }
  // y (rows, width) += the step's adapters on `product` of the layer, x (rows, in) its GEMM's input.
  void add_lora(LoraProduct product, int layer, const BatchIndices& idx, const T* x, int in, T* y, int width) {
    lora_.add(product, layer, idx.lora_tiles, idx.num_lora_tiles, x, in, y, width, width, context_.stream());
  }
  // step_head.cpp: the sampling rows' logits and tokens.
  void run_head(const RaggedBatch& batch, const BatchIndices& idx, const StepRequest& request, StepResult& out);
  void head_rows(const int32_t* d_rows, int n, float* d_logits);
  void pick_tokens(int num_logits, const StepRequest& request);
  // cuda_backend.cpp: what the backend is, and which kernels it takes.
  BackendTraits make_traits() const;

  ModelConfig config_;
  CudaBackendOptions options_;
  CudaContext context_;
  DeviceWeights<T> weights_;
  LinearRunner<T> linear_;      // the layers' linear weights, in T, FP8 or blocks (with its scratch matrix)
  Workspace<T> workspace_;
  RecurrentStates<T> recurrent_;  // a hybrid model's state slots and recurrent buffers; empty without recurrent layers
  MoeFfn<T> moe_;               // sparse layers' routing, permutation and expert buffers
  LoraWeights<T> lora_;         // LoRA adapters, added after each targeted GEMM; empty without any
  int experts_touched_ = 0;     // this step's, summed over the sparse layers (StepResult::experts_touched)
  AttentionShape shape_;        // block_size, num_blocks set by allocate_kv_cache
  DeviceBuffer<uint8_t> kv_cache_;  // (layers_per_page, 2 (k, v), num_blocks, block_size * slot_values_): a
                                    // layer's (num_blocks, cache_heads, block_size, head_dim) (layer_shape),
                                    // elements of T, or E4M3 codes with --kv-cache-dtype fp8
  // (num_layers, 2 (k, v)) fp32 scales of an FP8 cache: all 1.0, as vLLM's default where a checkpoint has
  // none; a checkpoint's calibrated k/v scales would be copied here (none is read yet).
  DeviceBuffer<float> kv_scales_ = unit_kv_scales(config_.num_layers);
  BatchUploader uploader_;      // sized by allocate_kv_cache (the block table width needs block_size)
  StepProfiler profiler_{options_.kernels.profile};  // --cuda-profile: each phase's device time too
  DeviceLogprobs logprobs_;     // answers the steps' logprob queries
  // Single-row sequences take decode_attention, on the tensor cores for bf16/fp16 where it has a kernel
  // for the head_dim (decode_kernel_choice; --cuda-kernel decode=cuda-cores keeps them on the CUDA-core
  // kernel, decode=paged sends them through the general paged_attention, for comparison;
  // decode=tensor-cores-16 picks the fallback kernel). Its split-KV scratch holds max_partials() partial
  // results; the stream kernel's holds two per warp. A step's split and stream plan depend on the keys a row
  // sees, so there is one of each per window kind.
  std::optional<DecodeKernel> decode_kernel_ = decode_kernel_choice();  // none: all rows paged
  std::vector<int> windows_;                  // the layers' distinct windows (window_kinds)
  KvGroups kv_groups_;                        // each layer's KV group (its block table) and cache slot
  int slot_values_ = cache_slot_values(config_, kv_groups_);  // K (or V) values a token in a cache slot
  std::vector<DecodeSplit> decode_split_;     // (windows_.size()) this step's
  std::vector<DecodeStream> decode_stream_;   // (windows_.size()) this step's
  std::optional<DecodeStreamLimits> stream_limits_;  // asked of the device on the first stream step
  DeviceBuffer<float> decode_partial_o_;   // (max_partials, group, head_dim)
  DeviceBuffer<float> decode_partial_ml_;  // (max_partials, group, 2)

  // Multi-row tiles in bf16/fp16 take the tensor-core prefill_attention (--cuda-kernel prefill=off sends
  // them through the CUDA-core paged_attention, for comparison; fp32 and layers of head_dim 256 or 512 always
  // use paged_attention: takes_prefill_kernel).
  bool use_prefill_kernel_ = !std::is_same_v<T, float> && options_.kernels.prefill_tensor_cores;
  bool takes_prefill_kernel(int layer) const { return use_prefill_kernel_ && config_.head_dim_of(layer) <= 128; }

  // Sampled rows drawn on the GPU by sample_rows instead of copying their logits to the host's Sampler
  // (--cuda-kernel sampling=host keeps the host path). Checked on an H200 (2026-11-26): the host's tokens, and
  // the 1B shape at T = 1 gave 27,155 output tok/s against the host path's 3,476.
  bool device_sampling_ = options_.kernels.device_sampling;
  BackendTraits traits_;  // make_traits(), once built
  SamplingLists sampling_lists_;  // a step's penalty tokens and token masks on the device

  int num_sms() const { return context_.properties().multiProcessorCount; }
  int max_partials() const { return 16 * num_sms(); }
  // cuda_backend.cpp: the kernel choices.
  // The context, once its GPU is known to give the attention kernels the shared memory they need at the
  // head_dim (at 256 the CUDA-core kernels need about 140 KB a CTA, more than sm_86/89 allow).
  const CudaContext& context_with_shared_memory() const;
  // The decode kernel for the rows of single-row sequences (decode_kernel_for_dtype): the stream kernel
  // unless --cuda-kernel decode= asks for another or its 2-stage shared memory does not fit the GPU
  // (sm_86/89/120 at head_dim 128), then the 16-key tensor-core kernel (at most 99 KB). Measured on an H200
  // (docs/benchmarks, 2026-11-26): the stream kernel read the KV cache at 0.65-0.87 of the copy rate on
  // 256-sequence batches, the 16-key kernel at 0.69-0.77 (ahead only on 8 and 32 sequences: 0.54 and 0.16
  // against 0.49 and 0.13), and the stream kernel gave the 8B shape's 1000/1000 workload 7,380 output tok/s.
  std::optional<DecodeKernel> decode_kernel_choice() const;
  // The decode kernel the model's shape and the asked kernel give for T, before asking the GPU (none: all
  // rows paged).
  static std::optional<DecodeKernel> decode_kernel_for_dtype(const ModelConfig& c, DecodeAttention asked);
};

}  // namespace cbatch
