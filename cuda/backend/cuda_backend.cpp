// The CUDA backend: one forward pass over ragged batches for every family of ModelConfig's description,
// with the weights in the compute dtype T (bf16, fp16 or fp32), an fp32 residual stream, fp32 softmax and
// logits, and a paged KV cache in T (or in FP8 E4M3 with --kv-cache-dtype fp8, kv_cache_dtype.hpp). Per
// layer: norm -> fused QKV GEMM -> (biases, q/k norms) RoPE + cache write -> paged attention (the layer's
// scale, softcap, window and sinks) -> wo GEMM -> residual add (of the o bias, and of the sandwich-normed
// output) + norm -> fused
// gate|up GEMM -> SwiGLU or GeGLU -> w_down GEMM (added to x by the next norm), or in a sparse layer the
// experts (moe_ffn.hpp); the final logits softcapped where the family does. Everything runs on the
// context's one stream; forward() synchronizes once, after the single device-to-host copy, plus once per
// sparse layer (its expert offsets reach the host for the GEMM shapes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/attention/attention_tiles.hpp"
#include "cuda/attention/decode_attention.hpp"
#include "cuda/attention/decode_stream.hpp"
#include "cuda/attention/kv_cache_dtype.hpp"
#include "cuda/attention/paged_attention.hpp"
#include "cuda/attention/prefill_attention.hpp"
#include "cuda/attention/rope_kv_cache.hpp"
#include "cuda/backend/backend_checks.hpp"
#include "cuda/backend/batch_indices.hpp"
#include "cuda/backend/cuda_backend.hpp"
#include "cuda/backend/device_peaks.hpp"
#include "cuda/backend/device_weights.hpp"
#include "cuda/backend/step_profiler.hpp"
#include "cuda/backend/workspace.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_context.hpp"
#include "cuda/elementwise/embedding.hpp"
#include "cuda/elementwise/rmsnorm.hpp"
#include "cuda/elementwise/softcap.hpp"
#include "cuda/elementwise/swiglu.hpp"
#include "cuda/gemm/gemm.hpp"
#include "cuda/gemm/linear.hpp"
#include "cuda/lora/lora_weights.hpp"
#include "cuda/moe/moe_ffn.hpp"
#include "cuda/sampling/argmax.hpp"
#include "cuda/sampling/device_logprobs.hpp"
#include "cuda/sampling/sample_rows.hpp"
#include "engine/sample/token_mask.hpp"

namespace cbatch {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// (num_layers, 2) FP8 cache scales of 1.0 on the device (kv_cache_dtype.hpp).
DeviceBuffer<float> unit_kv_scales(int num_layers) {
  const std::vector<float> ones(2 * static_cast<size_t>(std::max(num_layers, 1)), 1.0f);
  DeviceBuffer<float> scales(ones.size());
  CUDA_CHECK(cudaMemcpy(scales.get(), ones.data(), scales.bytes(), cudaMemcpyHostToDevice));
  return scales;
}

template <typename T>
class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const CudaBackendOptions& options)
      : config_(checked_config(model.config)),
        options_(options),
        context_(options.device_index),
        weights_(upload_weights<T>(model, context_with_shared_memory().stream(), options.fp8_weights,
                                   options.kernels.quantized_experts)),
        linear_(context_, options.fp8_weights, options.max_batch_tokens,
                std::max({config_.dim, config_.q_dim(), config_.hidden_dim})),
        workspace_(config_, options.max_batch_tokens, options.max_num_seqs),
        moe_(config_, options.max_batch_tokens, options.kernels.grouped_moe_gemm),
        shape_{config_.num_heads, config_.num_kv_heads, config_.head_dim, 0, 0},
        windows_(window_kinds(config_)),
        decode_split_(windows_.size()),
        decode_stream_(windows_.size()),
        decode_partial_o_(static_cast<size_t>(max_partials()) * (config_.num_heads / config_.num_kv_heads) *
                          config_.head_dim),
        decode_partial_ml_(static_cast<size_t>(max_partials()) * (config_.num_heads / config_.num_kv_heads) * 2) {
    for (const LayerWeights<T>& w : weights_.layers) {
      for (const LinearWeight<T>& linear : w.linear.items) linear_.check(linear);
    }
    if (options.loras) lora_ = LoraWeights<T>(*options.loras, config_.num_layers, options.max_batch_tokens);
    traits_ = make_traits();
  }

  const BackendTraits& traits() const override { return traits_; }

  int64_t kv_block_bytes(int block_size) const override {
    return int64_t{2} * config_.num_layers * block_size * config_.kv_dim() * kv_elem_bytes();
  }

  int64_t max_kv_blocks(int block_size) const override;
  void allocate_kv_cache(const KvCacheSpec& spec) override;
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
  // The longest sequence the engine will run: the KV cache must hold at least one of these.
  int max_context() const { return std::max(options_.max_context > 0 ? options_.max_context : config_.max_context, 1); }
  // Block table width accepted from the engine: generous (the model's own limit too), it costs little.
  BatchLimits limits(int block_size, int num_blocks) const {
    const int table_context = std::max({options_.max_context, config_.max_context, 1});
    return BatchLimits{options_.max_batch_tokens, options_.max_num_seqs,
                       static_cast<int>(ceil_div(table_context, block_size)), config_.vocab_size, num_blocks,
                       block_size, lora_.num_adapters()};
  }
  size_t layer_cache_elems() const {
    return static_cast<size_t>(shape_.num_blocks) * shape_.block_size * config_.kv_dim();
  }
  // The cache element: 1 byte (E4M3) with --kv-cache-dtype fp8, else T.
  int64_t kv_elem_bytes() const { return options_.fp8_kv_cache ? 1 : static_cast<int64_t>(sizeof(T)); }
  // The layer's K (part 0) or V (part 1) cache as elements of KV (uint8_t: its bytes, whatever the element).
  template <typename KV>
  KV* layer_cache(int layer, int part) const {
    const size_t bytes = static_cast<size_t>(kv_elem_bytes()) * layer_cache_elems();
    return reinterpret_cast<KV*>(kv_cache_.get() + (2 * static_cast<size_t>(layer) + part) * bytes);
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

  void copy_blocks(const RaggedBatch& batch, cudaStream_t stream);
  void plan_decode(const RaggedBatch& batch, const BatchIndices& idx);
  void run_layer(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  template <typename KV>
  void run_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx);
  template <typename KV>
  void run_tile_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx);
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
  const float* post_ffn_norm(int layer) const {
    return weights_.layers[static_cast<size_t>(layer)].vector(LayerTensor::kPostFfnNorm);  // null: no sandwich norms
  }
  // y (rows, width) += the step's adapters on `product` of the layer, x (rows, in) its GEMM's input.
  void add_lora(LoraProduct product, int layer, const BatchIndices& idx, const T* x, int in, T* y, int width) {
    lora_.add(product, layer, idx.lora_tiles, idx.num_lora_tiles, x, in, y, width, width, context_.stream());
  }
  void run_head(const RaggedBatch& batch, const BatchIndices& idx, const StepRequest& request, StepResult& out);
  void head_rows(const int32_t* d_rows, int n, float* d_logits);
  void pick_tokens(int num_logits, const StepRequest& request);
  const PenaltyToken* upload_penalty_tokens(const StepRequest& request);
  const uint64_t* upload_token_mask(const StepRequest& request);
  BackendTraits make_traits() const;

  ModelConfig config_;
  CudaBackendOptions options_;
  CudaContext context_;
  DeviceWeights<T> weights_;
  LinearRunner<T> linear_;      // the layers' linear weights, in T or FP8
  Workspace<T> workspace_;
  MoeFfn<T> moe_;               // sparse layers' routing, permutation and expert buffers
  LoraWeights<T> lora_;         // LoRA adapters, added after each targeted GEMM; empty without any
  int experts_touched_ = 0;     // this step's, summed over the sparse layers (StepResult::experts_touched)
  AttentionShape shape_;        // block_size, num_blocks set by allocate_kv_cache
  DeviceBuffer<uint8_t> kv_cache_;  // (num_layers, 2 (k, v), num_blocks, num_kv_heads, block_size, head_dim)
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
  std::vector<DecodeSplit> decode_split_;     // (windows_.size()) this step's
  std::vector<DecodeStream> decode_stream_;   // (windows_.size()) this step's
  std::optional<DecodeStreamLimits> stream_limits_;  // asked of the device on the first stream step
  DeviceBuffer<float> decode_partial_o_;   // (max_partials, group, head_dim)
  DeviceBuffer<float> decode_partial_ml_;  // (max_partials, group, 2)

  // Multi-row tiles in bf16/fp16 take the tensor-core prefill_attention (--cuda-kernel prefill=off sends
  // them through the CUDA-core paged_attention, for comparison; fp32 and head_dim 256 always use
  // paged_attention).
  bool use_prefill_kernel_ = !std::is_same_v<T, float> && options_.kernels.prefill_tensor_cores &&
                             config_.head_dim <= 128;

  // Sampled rows drawn on the GPU by sample_rows instead of copying their logits to the host's Sampler
  // (--cuda-kernel sampling=host keeps the host path). Checked on an H200 (2026-11-26): the host's tokens, and
  // the 1B shape at T = 1 gave 27,155 output tok/s against the host path's 3,476.
  bool device_sampling_ = options_.kernels.device_sampling;
  BackendTraits traits_;  // make_traits(), once built
  DeviceBuffer<PenaltyToken> penalty_tokens_;       // (capacity) a step's penalized rows' tokens, grown on demand
  PinnedBuffer<PenaltyToken> host_penalty_tokens_;  // (capacity) their staging copy
  DeviceBuffer<uint64_t> token_mask_;                // (capacity) a step's constrained rows' masks, grown on demand
  PinnedBuffer<uint64_t> host_token_mask_;           // (capacity) their staging copy

  int num_sms() const { return context_.properties().multiProcessorCount; }
  // The context, once its GPU is known to give the attention kernels the shared memory they need at the
  // head_dim (at 256 the CUDA-core kernels need about 140 KB a CTA, more than sm_86/89 allow).
  const CudaContext& context_with_shared_memory() const {
    if (config_.head_dim <= 128) return context_;  // every kernel fits every supported GPU
    const size_t need = std::max(paged_attention_smem_bytes(config_.head_dim) + kAttentionItemsPerTile * sizeof(int),
                                 decode_cuda_cores_smem_bytes<T>(config_.head_dim));
    const size_t has = context_.properties().sharedMemPerBlockOptin;
    if (need > has) {
      unsupported("head_dim " + std::to_string(config_.head_dim) + " on " + context_.properties().name +
                  ": its attention kernels need " + std::to_string(need) + " bytes of shared memory per block, the "
                  "GPU allows " + std::to_string(has) + " (use --device cpu)");
    }
    return context_;
  }
  int max_partials() const { return 16 * num_sms(); }
  // The decode kernel for the rows of single-row sequences (decode_kernel_for_dtype): the stream kernel
  // unless --cuda-kernel decode= asks for another or its 2-stage shared memory does not fit the GPU
  // (sm_86/89/120 at head_dim 128), then the 16-key tensor-core kernel (at most 99 KB). Measured on an H200
  // (docs/benchmarks, 2026-11-26): the stream kernel read the KV cache at 0.65-0.87 of the copy rate on
  // 256-sequence batches, the 16-key kernel at 0.69-0.77 (ahead only on 8 and 32 sequences: 0.54 and 0.16
  // against 0.49 and 0.13), and the stream kernel gave the 8B shape's 1000/1000 workload 7,380 output tok/s.
  std::optional<DecodeKernel> decode_kernel_choice() const {
    const std::optional<DecodeKernel> kernel = decode_kernel_for_dtype(config_, options_.kernels.decode);
    if constexpr (!std::is_same_v<T, float>) {
      if (kernel == DecodeKernel::kStream) {
        const size_t has = context_.properties().sharedMemPerBlockOptin;
        const size_t need = options_.fp8_kv_cache ? decode_stream_smem_bytes<T, Fp8E4M3>(config_.head_dim, 2)
                                                  : decode_stream_smem_bytes<T, T>(config_.head_dim, 2);
        if (need > has) return DecodeKernel::kTensorCores16;
      }
    }
    return kernel;
  }
  static std::optional<DecodeKernel> decode_kernel_for_dtype(const ModelConfig& c, DecodeAttention asked) {
    const bool shape_ok = c.num_heads / c.num_kv_heads <= kDecodeMaxGroup &&
                          (c.head_dim == 16 || c.head_dim == 32 || c.head_dim == 64 || c.head_dim == 128 ||
                           c.head_dim == kWideHeadDim);
    if (!shape_ok || asked == DecodeAttention::kPaged) return std::nullopt;
    if (std::is_same_v<T, float> || asked == DecodeAttention::kCudaCores || !decode_tensor_cores_support(c.head_dim)) {
      return DecodeKernel::kCudaCores;
    }
    return asked == DecodeAttention::kTensorCores16 ? DecodeKernel::kTensorCores16 : DecodeKernel::kStream;
  }
};

template <typename T>
int64_t CudaBackend<T>::max_kv_blocks(int block_size) const {
  if (block_size <= 0) throw Error("block size must be positive, got " + std::to_string(block_size));
  context_.make_current();
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double budget = static_cast<double>(total_bytes) * options_.gpu_memory_utilization;
  // Weights, workspace and the CUDA context; a cache this backend already holds is replaced, so it and its
  // batch index buffer count as free.
  const double own_cache = static_cast<double>(kv_cache_.bytes() + uploader_.device_bytes());
  const double in_use = static_cast<double>(total_bytes - free_bytes) - own_cache;
  const double index_bytes = static_cast<double>(BatchUploader::capacity(limits(block_size, 0)) * sizeof(int32_t));
  const double available = budget - in_use - index_bytes;
  const int64_t block_bytes = kv_block_bytes(block_size);
  const int64_t blocks = available > 0 ? static_cast<int64_t>(available / static_cast<double>(block_bytes)) : 0;
  const int64_t needed = ceil_div(max_context(), block_size);
  if (blocks <= 0 || blocks < needed) {
    throw Error("not enough GPU memory for the KV cache: " + gib_string(static_cast<double>(total_bytes)) + " x " +
                std::to_string(options_.gpu_memory_utilization) + " = " + gib_string(budget) + " allowed, " +
                gib_string(in_use) + " already in use (weights " + gib_string(static_cast<double>(weights_.bytes())) +
                ", workspace " + gib_string(static_cast<double>(workspace_.device_bytes() + moe_.device_bytes())) +
                "), leaving " +
                gib_string(std::max(available, 0.0)) + " for " + std::to_string(blocks) + " blocks; one sequence of " +
                std::to_string(max_context()) + " tokens needs " + std::to_string(needed) + " blocks of " +
                std::to_string(block_bytes) + " bytes. Raise --gpu-memory-utilization, lower --max-num-batched-tokens "
                "or --max-num-seqs, or use a smaller dtype or model");
  }
  return blocks;
}

template <typename T>
void CudaBackend<T>::allocate_kv_cache(const KvCacheSpec& spec) {
  if (spec.num_blocks <= 0 || spec.block_size <= 0) {
    throw Error("KV cache needs positive num_blocks and block_size, got " + std::to_string(spec.num_blocks) + " and " +
                std::to_string(spec.block_size));
  }
  context_.make_current();
  kv_cache_ = DeviceBuffer<uint8_t>();  // free the old cache before asking for the new one
  uploader_ = BatchUploader();
  shape_.block_size = 0;          // "no cache" until every allocation below has succeeded
  shape_.num_blocks = 0;
  const size_t layer_elems = static_cast<size_t>(spec.num_blocks) * spec.block_size * config_.kv_dim();
  DeviceBuffer<uint8_t> cache(2 * static_cast<size_t>(config_.num_layers) * layer_elems * kv_elem_bytes());
  BatchUploader uploader(limits(spec.block_size, spec.num_blocks));
  // Never read before written (attention only loads positions 0..max position of its rows); zeroed so
  // a stray read would give finite values and runs stay deterministic.
  if (cache.bytes() > 0) CUDA_CHECK(cudaMemsetAsync(cache.get(), 0, cache.bytes(), context_.stream()));
  kv_cache_ = std::move(cache);
  uploader_ = std::move(uploader);
  shape_.block_size = spec.block_size;
  shape_.num_blocks = spec.num_blocks;
  context_.synchronize();
}

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
  try {
    profiler_.begin_step(stream, batch.num_tokens() == batch.num_seqs());
    const BatchIndices idx = uploader_.upload(batch, paged_attention_rows_per_tile(shape_), decode_kernel_.has_value(),
                                               stream, windows_);
    profiler_.phase("upload", stream);
    plan_decode(batch, idx);
    embedding<T>(workspace_.x.get(), weights_.embedding(), idx.tokens, batch.num_tokens(), config_.dim, stream,
                 config_.embedding_scale);
    profiler_.phase("embedding", stream);
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

// Copy-on-write of blocks that n > 1 samples shared: every layer's K and V of each source block into its
// destination, on the step's stream before anything writes (a block of one layer's K or V is contiguous).
template <typename T>
void CudaBackend<T>::copy_blocks(const RaggedBatch& batch, cudaStream_t stream) {
  const size_t block_bytes = static_cast<size_t>(shape_.block_size) * config_.kv_dim() * kv_elem_bytes();
  for (int c = 0; c < batch.num_block_copies(); ++c) {
    const int32_t src = batch.block_copies[2 * c], dst = batch.block_copies[2 * c + 1];
    if (src < 0 || dst < 0 || src >= shape_.num_blocks || dst >= shape_.num_blocks) {
      throw Error("CUDA backend: block copy " + std::to_string(src) + " -> " + std::to_string(dst) +
                  " outside the KV cache");
    }
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      for (uint8_t* cache : {k_cache<uint8_t>(layer), v_cache<uint8_t>(layer)}) {  // bytes, whatever the element
        CUDA_CHECK(cudaMemcpyAsync(cache + dst * block_bytes, cache + src * block_bytes, block_bytes,
                                   cudaMemcpyDeviceToDevice, stream));
      }
    }
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
  return f;
}

template <typename T>
void CudaBackend<T>::run_layer(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  const LayerWeights<T>& w = weights_.layers[static_cast<size_t>(layer)];
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int n = batch.num_tokens();
  const int dim = config_.dim;
  const int hidden = config_.hidden_dim;
  const float eps = config_.rms_eps;
  const T* previous_delta = layer == 0 ? nullptr : ws.delta.get();  // the previous layer's w_down output
  const float* previous_post_norm = layer == 0 ? nullptr : post_ffn_norm(layer - 1);  // its sandwich norm

  rmsnorm_residual<T>(ws.h.get(), ws.x.get(), previous_delta, w.vector(LayerTensor::kAttnNorm), n, dim, eps, stream,
                      previous_post_norm);
  profiler_.phase("norm", stream);
  const int qkv_dim = config_.q_dim() + 2 * config_.kv_dim();
  linear_.forward(w.linear[LayerProduct::kQkv], ws.qkv.get(), ws.h.get(), n);
  add_lora(LoraProduct::kQkv, layer, idx, ws.h.get(), dim, ws.qkv.get(), qkv_dim);
  profiler_.phase("gemm_qkv", stream);
  with_kv_type([&](auto kv) { run_attention<typename decltype(kv)::type>(layer, batch, idx); });
  linear_.forward(w.linear[LayerTensor::kWo], ws.delta.get(), ws.attn.get(), n);
  add_lora(LoraProduct::kO, layer, idx, ws.attn.get(), config_.q_dim(), ws.delta.get(), dim);
  profiler_.phase("gemm_o", stream);
  rmsnorm_residual<T>(ws.h.get(), ws.x.get(), ws.delta.get(), w.vector(LayerTensor::kFfnNorm), n, dim, eps, stream,
                      w.vector(LayerTensor::kPostAttnNorm),
                      w.vector(LayerTensor::kBo));  // the o bias (null when absent) joins delta here
  profiler_.phase("norm", stream);
  if (config_.is_sparse(layer)) {
    experts_touched_ += moe_.forward(w, ws.h.get(), n, ws.delta.get(), context_, profiler_);
    return;
  }
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

// The layer's RoPE and cache write, then the attention of its rows over a cache of KV elements.
template <typename T>
template <typename KV>
void CudaBackend<T>::run_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int kind = window_kind(layer);
  rope_kv_cache<T, KV>(ws.qkv.get(), k_cache<KV>(layer), v_cache<KV>(layer), idx.positions, idx.slots,
                       rope_table(layer), batch.num_tokens(), shape_, config_.rope_layout == RopeLayout::kHalves,
                       stream, rope_family(layer), kv_scales(layer));
  profiler_.phase("rope_kv", stream);
  run_tile_attention<KV>(layer, batch, idx);
  profiler_.phase("attn_tiles", stream);
  decode_attention<T, KV>(ws.attn.get(), ws.qkv.get(), k_cache<KV>(layer), v_cache<KV>(layer), idx.positions,
                          idx.query_start, idx.block_tables, batch.max_blocks_per_seq, idx.decode_seqs, idx.num_decode,
                          decode_split_[kind], decode_partial_o_.get(), decode_partial_ml_.get(), max_partials(),
                          shape_, stream, decode_kernel_.value_or(DecodeKernel::kCudaCores), &decode_stream_[kind],
                          scoring(layer), kv_scales(layer));
  profiler_.phase("attn_decode", stream);
}

// Attention of the sequences with several rows (all sequences when the decode kernel is off).
template <typename T>
template <typename KV>
void CudaBackend<T>::run_tile_attention(int layer, const RaggedBatch& batch, const BatchIndices& idx) {
  auto* attend = &paged_attention<T, KV>;  // the two launchers share one signature
  if constexpr (!std::is_same_v<T, float>) {
    if (use_prefill_kernel_) attend = &prefill_attention<T, KV>;
  }
  attend(workspace_.attn.get(), workspace_.qkv.get(), k_cache<KV>(layer), v_cache<KV>(layer), idx.positions,
         idx.query_start, idx.block_tables, batch.max_blocks_per_seq, idx.tile_seq, idx.tile_row, idx.num_tiles,
         shape_, context_.stream(), scoring(layer), kv_scales(layer));
}

template <typename T>
BackendTraits CudaBackend<T>::make_traits() const {
  BackendTraits t;
  t.device_name = std::string("cuda:") + context_.properties().name + (options_.fp8_weights ? " (fp8 weights)" : "");
  t.samples_on_device = device_sampling_;
  t.answers_logprob_queries = true;
  // With fp8 weights the layers stream 1 byte a parameter; the lm_head, still in T, is counted at 1 too.
  t.weight_bytes_per_param = options_.fp8_weights ? 1.0 : sizeof(T);
  // Routed experts as kept (device_weights.hpp): MXFP4 17/32, Q8_0 34/32, FP8 1 + the row scales' 4 / k, else T.
  double bytes = 0, params = 0;
  for (const LayerWeights<T>& w : weights_.layers) {
    const ExpertMatrix<T>& gate_up = w.experts[ExpertProduct::kGateUp];
    if (gate_up.bytes() == 0) continue;  // a dense layer
    bytes += static_cast<double>(gate_up.bytes() + w.experts[ExpertTensor::kDown].bytes());
    params += 3.0 * config_.num_experts * config_.dim * config_.expert_hidden_dim;
  }
  t.expert_bytes_per_param = params > 0 ? bytes / params : t.weight_bytes_per_param;
  t.kv_bytes_per_elem = static_cast<double>(kv_elem_bytes());
  return t;
}

// Final norm and lm_head for the sampling rows only, then their logits or next token ids back to the host.
template <typename T>
void CudaBackend<T>::run_head(const RaggedBatch& batch, const BatchIndices& idx, const StepRequest& request,
                              StepResult& out) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int num_logits = batch.num_logits();
  const int vocab = config_.vocab_size;
  const float* step_logits = ws.logits.get();
  if (num_logits > 0) {
    head_rows(idx.logits_rows, num_logits, ws.logits.get());
    profiler_.phase("lm_head", stream);  // final norm and logits; the rest of the step is "pick+copy"
    // The device sampler applies masks and penalties to the logits in place: logprobs come from a copy
    // made before (logprobs are of the raw logits).
    if (!request.logprob_queries.empty() && (!request.penalty_tokens.empty() || !request.token_mask.empty())) {
      step_logits = logprobs_.keep_raw(ws.logits.get(), static_cast<size_t>(num_logits) * vocab, stream);
    }
    if (request.want_logits) {
      out.logits.resize(static_cast<size_t>(num_logits) * vocab);
      CUDA_CHECK(cudaMemcpyAsync(out.logits.data(), ws.logits.get(), out.logits.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream));
    } else {
      pick_tokens(num_logits, request);
    }
  }
  if (!request.logprob_queries.empty()) {  // only k values a row come back
    const DeviceLogprobs::Head head = [this](const int32_t* d_rows, int n, float* d_logits) { head_rows(d_rows, n, d_logits); };
    logprobs_.answer(batch, vocab, options_.max_batch_tokens, step_logits, ws.token_ids.get(), head, stream, request, out);
    profiler_.phase("logprobs", stream);
  }
  profiler_.end_step(stream);  // the step's one synchronization; also frees the pinned index buffer for reuse
  if (!request.want_logits) out.token_ids.assign(ws.host_token_ids.get(), ws.host_token_ids.get() + num_logits);
}

// The final norm and lm_head of batch rows d_rows[0..n) (n <= max_batch_tokens) into d_logits (n, vocab) fp32.
template <typename T>
void CudaBackend<T>::head_rows(const int32_t* d_rows, int n, float* d_logits) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const int last = config_.num_layers - 1;
  const T* last_delta = last >= 0 ? ws.delta.get() : nullptr;
  rmsnorm_gather<T>(ws.h.get(), ws.x.get(), last_delta, weights_.final_norm(), d_rows, n, config_.dim,
                    config_.rms_eps, stream, last >= 0 ? post_ffn_norm(last) : nullptr);
  gemm<T, float>(context_.cublas(), stream, d_logits, ws.h.get(), weights_.lm_head(), n, config_.vocab_size, config_.dim);
  if (config_.final_softcap > 0.0f) {
    softcap(d_logits, static_cast<size_t>(n) * config_.vocab_size, config_.final_softcap, stream);
  }
}

// The sampling rows' next tokens from the logits on the device (argmax, or each row's draw), copied back.
template <typename T>
void CudaBackend<T>::pick_tokens(int num_logits, const StepRequest& request) {
  Workspace<T>& ws = workspace_;
  const cudaStream_t stream = context_.stream();
  const size_t rows = static_cast<size_t>(num_logits);
  if (request.sampling.empty()) {
    argmax(ws.token_ids.get(), ws.logits.get(), num_logits, config_.vocab_size, stream);
  } else {
    if (!device_sampling_ || request.sampling.size() != rows) {
      throw Error("CUDA backend: " + std::to_string(request.sampling.size()) + " row sampling parameters for " +
                  std::to_string(rows) + " sampling rows" + (device_sampling_ ? "" : " (device sampling is off)"));
    }
    const PenaltyToken* d_penalty_tokens = upload_penalty_tokens(request);
    const uint64_t* d_token_mask = upload_token_mask(request);
    std::copy(request.sampling.begin(), request.sampling.end(), ws.host_sampling.get());
    CUDA_CHECK(cudaMemcpyAsync(ws.sampling.get(), ws.host_sampling.get(), rows * sizeof(RowSampling),
                               cudaMemcpyHostToDevice, stream));
    sample_rows(ws.token_ids.get(), ws.logits.get(), ws.sampling.get(), d_penalty_tokens, d_token_mask, num_logits,
                config_.vocab_size, stream);
  }
  CUDA_CHECK(cudaMemcpyAsync(ws.host_token_ids.get(), ws.token_ids.get(), rows * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, stream));
}

// A step's list on the device (nullptr when empty), copied through its pinned staging buffer. The buffers
// grow to twice what a step needs, so that growing is rare (growing frees the old ones, which waits for
// the device).
template <typename V>
const V* upload_step_list(const std::vector<V>& values, DeviceBuffer<V>& device, PinnedBuffer<V>& staging,
                          cudaStream_t stream) {
  const size_t n = values.size();
  if (n == 0) return nullptr;
  if (n > device.size()) {
    device = DeviceBuffer<V>();
    staging = PinnedBuffer<V>();
    device = DeviceBuffer<V>(2 * n);
    staging = PinnedBuffer<V>(2 * n);
  }
  std::copy(values.begin(), values.end(), staging.get());
  CUDA_CHECK(cudaMemcpyAsync(device.get(), staging.get(), n * sizeof(V), cudaMemcpyHostToDevice, stream));
  return device.get();
}

// The step's penalty tokens on the device (nullptr when there are none), after checking that every row's
// range lies inside them.
template <typename T>
const PenaltyToken* CudaBackend<T>::upload_penalty_tokens(const StepRequest& request) {
  const size_t n = request.penalty_tokens.size();
  for (const RowSampling& row : request.sampling) {
    if (row.penalty_begin < 0 || row.penalty_begin > row.penalty_end || static_cast<size_t>(row.penalty_end) > n) {
      throw Error("CUDA backend: penalty tokens [" + std::to_string(row.penalty_begin) + ", " +
                  std::to_string(row.penalty_end) + ") of a row outside the step's " + std::to_string(n));
    }
  }
  return upload_step_list(request.penalty_tokens, penalty_tokens_, host_penalty_tokens_, context_.stream());
}

// The step's constraint masks on the device (one copy; nullptr when no row has one), after checking
// that every masked row's words lie inside them.
template <typename T>
const uint64_t* CudaBackend<T>::upload_token_mask(const StepRequest& request) {
  const size_t n = request.token_mask.size();
  const size_t words = static_cast<size_t>(token_mask_words(config_.vocab_size));
  for (const RowSampling& row : request.sampling) {
    if (row.mask_offset < -1 || (row.mask_offset >= 0 && static_cast<size_t>(row.mask_offset) + words > n)) {
      throw Error("CUDA backend: a row's token mask at word " + std::to_string(row.mask_offset) + " (" +
                  std::to_string(words) + " words) outside the step's " + std::to_string(n));
    }
  }
  return upload_step_list(request.token_mask, token_mask_, host_token_mask_, context_.stream());
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const CudaBackendOptions& options) {
  if (options.loras) check_cuda_lora(*options.loras, model.config, options.fp8_weights);  // before the device
  check_options(options);
  switch (options.dtype) {
    case ComputeDType::kBF16: return std::make_unique<CudaBackend<__nv_bfloat16>>(model, options);
    case ComputeDType::kF16: return std::make_unique<CudaBackend<__half>>(model, options);
    case ComputeDType::kF32: return std::make_unique<CudaBackend<float>>(model, options);
  }
  throw Error("unknown compute dtype");
}

}  // namespace cbatch
