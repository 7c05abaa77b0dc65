// The CPU backend: weights converted once to fp32 (QKV and gate|up fused into one matrix each, matrices
// packed into matmul panels; embedding rows converted when looked up; norm weights with the family's
// offset added), an fp32 or bf16 paged KV cache (PagedKv's layout per layer), and one forward pass over a
// RaggedBatch for every family, driven by ModelConfig's description (biases, q/k norms, sandwich norms,
// GeGLU and clamped SwiGLU, embedding scale, softcaps, attention sinks, per-layer windows and RoPE bases;
// sparse layers' experts: cpu_moe.hpp; LoRA adapters: cpu_lora.hpp; encoders: learned positions, token
// types, LayerNorm, post-norm, plain FFN, bidirectional attention, and pooled rows instead of logits,
// through a cross-encoder's classification head when it has one: cpu_pooling.hpp). Matrix products go
// through the batch-invariant matmul; everything else is per row.
// (Over 500 lines because it is the one forward of every family.)
#include "engine/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "engine/cpu/cpu_attention.hpp"
#include "engine/cpu/cpu_lora.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_matmul_int8.hpp"
#include "engine/cpu/cpu_moe.hpp"
#include "engine/cpu/cpu_ops.hpp"
#include "engine/cpu/cpu_peaks.hpp"
#include "engine/cpu/cpu_pooling.hpp"
#include "engine/cpu/cpu_rope.hpp"
#include "engine/cpu/logprob_queries.hpp"
#include "engine/model/quant_blocks.hpp"
#include "engine/model/random_weights.hpp"
#include "engine/base/error.hpp"
#include "engine/base/thread_pool.hpp"

namespace cbatch {
namespace {

// A vector of floats that are not value-initialized: every weight is written once by its conversion
// (in parallel, so the pages are first touched on every core, never zero-filled by one thread first).
template <typename T>
struct NoInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using Weights = std::vector<float, NoInitAllocator<float>>;

// A zeroed array from calloc: large ones are fresh zero pages that become resident only when written, so
// the KV cache costs memory for the blocks in use, not for the whole reservation.
struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using ZeroedBytes = std::unique_ptr<uint8_t[], FreeDeleter>;

ZeroedBytes calloc_bytes(size_t n) {
  auto* p = static_cast<uint8_t*>(std::calloc(std::max<size_t>(n, 1), 1));
  if (p == nullptr) throw Error("cannot allocate " + std::to_string(n) + " bytes for the KV cache");
  return ZeroedBytes(p);
}

// Rows of several tensors stacked into one fp32 matrix (rows summed, cols shared). Each tensor is
// converted straight into its place, rows split across the pool: no intermediate copy, and the
// conversion (dequantization and first touch of the pages) runs on every core.
Weights stack_f32(std::initializer_list<const TensorView*> parts, ThreadPool& pool) {
  int64_t rows = 0;
  for (const TensorView* t : parts) rows += t->rows;
  const int64_t cols = (*parts.begin())->cols;
  Weights out(static_cast<size_t>(rows * cols));
  int64_t row = 0;
  for (const TensorView* t : parts) {
    float* dst = out.data() + row * cols;
    pool.parallel_for(t->rows, [&](int64_t begin, int64_t end) {
      tensor_rows_to_f32(*t, begin, end - begin, dst + begin * cols);
    }, 1, std::max<int64_t>(2, (1 << 16) / std::max<int64_t>(cols, 1)));
    row += t->rows;
  }
  return out;
}

// How block-type weights are packed: kept in their blocks (else expanded to fp32), and then as int8 panels
// for the 8-bit product (--cpu-precision fast), a 5- or 6-bit type's in planes or not (int8_planes).
struct Packing {
  bool keep_blocks = true;
  bool int8 = false;
  bool planes = false;
};

// Random (dummy) tensors kept in blocks: Q8_0 rows generated in fp32 and quantized, MXFP4 rows generated as
// their blocks (random_weights.hpp); then packed.
PackedMatrix pack_random_blocks(const std::vector<const TensorView*>& tensors, int64_t rows, int64_t cols,
                                ThreadPool& pool, bool int8) {
  const DType dtype = tensors.front()->dtype;
  if (dtype != DType::kQ8_0 && dtype != DType::kMXFP4) {
    throw Error("internal error: dummy weights cannot be generated as " + std::string(dtype_name(dtype)));
  }
  const int64_t stride = row_bytes(dtype, cols);
  std::vector<uint8_t> blocks(static_cast<size_t>(rows * stride));  // (rows, cols / 32) blocks
  pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      int64_t first = 0;
      const TensorView* t = tensors.front();
      for (const TensorView* part : tensors) {
        if (r < first + part->rows) { t = part; break; }
        first += part->rows;
      }
      uint8_t* out = &blocks[static_cast<size_t>(r * stride)];
      if (dtype == DType::kMXFP4) {
        const int64_t row_blocks = cols / 32;
        random_mxfp4_blocks(t->random.seed, t->random.scale, static_cast<uint64_t>((r - first) * row_blocks),
                            row_blocks, out);
        continue;
      }
      tensor_rows_to_f32(*t, r - first, 1, row.data());
      quantize_q8_0(row.data(), cols, out);
    }
  }, 1, std::max<int64_t>(2, (1 << 16) / std::max<int64_t>(cols, 1)));
  return PackedMatrix(rows, cols, dtype, [&](int64_t r) { return &blocks[static_cast<size_t>(r * stride)]; }, pool,
                      int8);
}

// Parts of different block types (Gemma 3's Q5_0 Q and K with a Q8_0 V) can still be int8 panels, one
// matrix per part, when each part but the last fills whole panels and all take the same activation block.
bool can_stack_int8(const std::vector<const TensorView*>& tensors, Packing packing) {
  if (!packing.int8 || !packing.keep_blocks || tensors.size() < 2) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView* t = tensors[i];
    if (t->is_random || !PackedMatrix::keeps_blocks(t->dtype, t->cols) || t->cols != tensors.front()->cols) return false;
    if (matmul_detail::q8_block(t->dtype) != matmul_detail::q8_block(tensors.front()->dtype)) return false;
    if (i + 1 < tensors.size() && t->rows % matmul_panel_width() != 0) return false;
  }
  return true;
}

// Rows of several tensors stacked (rows summed, cols shared) and packed for matmul, converted panel by
// panel across the pool (the packed layout is the only copy made). When every part is stored in the same
// block type the matrix keeps its blocks (packing.keep_blocks), else it is expanded to fp32.
PackedMatrix pack_stacked(std::initializer_list<const TensorView*> parts, ThreadPool& pool, Packing packing) {
  bool keep_blocks = packing.keep_blocks;
  const std::vector<const TensorView*> tensors(parts);
  int64_t rows = 0;
  for (const TensorView* t : tensors) rows += t->rows;
  const int64_t cols = tensors.front()->cols;
  const DType dtype = tensors.front()->dtype;
  keep_blocks = keep_blocks && PackedMatrix::keeps_blocks(dtype, cols);
  bool all_random = true;
  for (const TensorView* t : tensors) {
    keep_blocks = keep_blocks && t->dtype == dtype;
    all_random = all_random && t->is_random;
  }
  if (keep_blocks && all_random) return pack_random_blocks(tensors, rows, cols, pool, packing.int8);
  if (!keep_blocks && can_stack_int8(tensors, packing)) {
    std::vector<PackedMatrix> stacked;
    for (const TensorView* t : tensors) stacked.push_back(pack_stacked({t}, pool, packing));
    return PackedMatrix(std::move(stacked));
  }
  for (const TensorView* t : tensors) keep_blocks = keep_blocks && !t->is_random;
  if (keep_blocks) {
    auto row_blocks = [&](int64_t row) {
      int64_t first = 0;
      for (const TensorView* t : tensors) {
        if (row < first + t->rows) return static_cast<const uint8_t*>(t->data) + (row - first) * row_bytes(dtype, cols);
        first += t->rows;
      }
      throw Error("internal error: row " + std::to_string(row) + " past the stacked tensors");
    };
    return PackedMatrix(rows, cols, dtype, row_blocks, pool, packing.int8, packing.planes);
  }
  auto fill = [&](int64_t row, int64_t count, float* out) {
    int64_t first = 0;  // global row of the current tensor's row 0
    for (const TensorView* t : tensors) {
      const int64_t begin = std::max(row, first), end = std::min(row + count, first + t->rows);
      if (begin < end) tensor_rows_to_f32(*t, begin - first, end - begin, out + (begin - row) * cols);
      first += t->rows;
    }
  };
  return PackedMatrix(rows, cols, fill, pool);
}

// A norm weight as fp32 with the family's offset added (Gemma's (1 + w)); empty for an absent tensor.
Weights norm_weights(const TensorView& t, float offset, ThreadPool& pool) {
  if (t.empty()) return {};
  Weights w = stack_f32({&t}, pool);
  for (float& v : w) v += offset;
  return w;
}

struct CpuLayer {
  Weights attn_norm;       // (dim); with post_norm the norm after the attention's residual add
  Weights attn_norm_bias;  // (dim) or empty (LayerNorm)
  PackedMatrix wqkv;       // (q_dim + 2 * kv_dim, dim)
  Weights qkv_bias;        // (q_dim + 2 * kv_dim) or empty
  Weights q_norm;          // (head_dim) or empty
  Weights k_norm;          // (head_dim) or empty
  PackedMatrix wo;         // (dim, q_dim)
  Weights o_bias;          // (dim) or empty
  Weights sinks;           // (num_heads) or empty
  Weights post_attn_norm;  // (dim) or empty
  Weights ffn_norm;        // (dim); with post_norm the norm after the FFN's residual add
  Weights ffn_norm_bias;   // (dim) or empty (LayerNorm)
  PackedMatrix w_gate_up;  // (2 * hidden, dim) dense layers; (hidden, dim) the up projection of a plain FFN
  Weights up_bias;         // (hidden) plain FFN, else empty
  PackedMatrix w_down;     // (dim, hidden)       dense layers
  Weights down_bias;       // (dim) plain FFN, else empty
  MoeWeights moe;          // sparse layers: router and experts
  Weights post_ffn_norm;   // (dim) or empty
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const CpuBackendOptions& options)
      : config_(model.config), options_(options), pool_(options.num_threads, kDecodeSpinNs), storage_(model.storage) {
    load_weights(model.tensors);
    // auto: bf16 where K and V come out of 8-bit products (the activations are rounded already), else fp32
    kv_element_ = options.kv_element.value_or(layers_.empty() || !layers_.front().wqkv.is_int8() ? KvElement::kF32
                                                                                                   : KvElement::kBf16);
    if (options.loras) lora_ = CpuLoraSet(*options.loras, config_.num_layers, pool_);
    for (int set = 0; set < kRopeSets; ++set) {
      inv_freq_[set].resize(config_.head_dim / 2);
      rope_inv_freq(config_, inv_freq_[set].data(), set & kLocal, set & kLongRange);
    }
  }

  std::string device_name() const override { return "cpu"; }

  // Bytes a step streams per matrix parameter (4 for fp32 panels, under 1 for blocked ones), routed experts
  // aside.
  double weight_bytes_per_param() const override {
    return matrix_params_ > 0 ? static_cast<double>(matrix_bytes_) / static_cast<double>(matrix_params_) : 4.0;
  }
  // A routed expert's bytes per parameter as stored: its block type's (MXFP4 17/32, Q8_0 34/32) where the
  // experts keep their blocks, else 4 (fp32).
  double expert_bytes_per_param() const override {
    return expert_params_ > 0 ? expert_bytes_ / expert_params_ : weight_bytes_per_param();
  }

  // The machine's copy bandwidth and this backend's fp32 matmul rate on a large product (cpu_peaks.hpp).
  DevicePeaks measure_peaks() override { return measure_cpu_peaks(pool_); }

  int64_t kv_block_bytes(int block_size) const override {
    return 2LL * config_.num_layers * block_size * config_.kv_dim() * kv_element_bytes(kv_element_);
  }

  int64_t max_kv_blocks(int block_size) const override {
    return options_.kv_cache_bytes / kv_block_bytes(block_size);
  }

  void allocate_kv_cache(const KvCacheSpec& spec) override {
    spec_ = spec;
    const size_t n = static_cast<size_t>(config_.num_layers) * spec.num_blocks * spec.block_size * config_.kv_dim();
    k_cache_ = calloc_bytes(n * kv_element_bytes(kv_element_));
    v_cache_ = calloc_bytes(n * kv_element_bytes(kv_element_));
  }

  void forward(const RaggedBatch& batch, StepOutput& out) override;
  bool answers_logprob_queries() const override { return true; }
  bool pools_embeddings() const override { return true; }

 private:
  void load_weights(const ModelTensors& t);
  void resize_activations(int num_tokens);
  void copy_blocks(const RaggedBatch& batch);
  void group_rows_by_adapter(const RaggedBatch& batch);
  void attention_layer(const RaggedBatch& batch, int layer);
  void qkv_projection(const RaggedBatch& batch, int layer);
  void store_kv(const float* kv, int64_t layer_offset, int32_t slot);
  void add_sublayer_output(int num_tokens, const Weights& post_norm, const Weights& norm, const Weights& norm_bias);
  void norm_row(const float* x, const Weights& weight, const Weights& bias, float* out) const;
  void embed_rows(const RaggedBatch& batch);
  int64_t position_row(const RaggedBatch& batch, int r) const;
  int attention_extent(const RaggedBatch& batch, int64_t row) const;
  // Returns the experts the layer's rows picked (0 for a dense layer).
  int ffn_layer(int num_tokens, int l);
  void plain_ffn(int num_tokens, const CpuLayer& layer);
  void load_experts(const LayerTensors& l, MoeWeights& moe);
  void compute_logits(const RaggedBatch& batch, StepOutput& out);
  void head_rows(const int32_t* rows, int n, float* logits);
  void count_weights(const PackedMatrix& w) {
    matrix_bytes_ += static_cast<int64_t>(w.bytes());
    matrix_params_ += w.rows() * w.cols();
  }
  void count_expert_weights(const PackedMatrix& w) {
    for (const PackedMatrix& part : w.parts()) count_expert_weights(part);
    if (!w.parts().empty()) return;
    const double params = static_cast<double>(w.rows() * w.cols());
    const DType dtype = w.is_blocked() ? w.dtype() : DType::kF32;
    expert_bytes_ += params * static_cast<double>(dtype_block_bytes(dtype)) /
                     static_cast<double>(dtype_block_elems(dtype));
    expert_params_ += params;
  }

  ModelConfig config_;
  CpuBackendOptions options_;
  ThreadPool pool_;
  // (vocab, dim) as stored (mapped file, owned buffer or random): rows are converted to fp32 when looked
  // up, so the table never has an fp32 copy (the tied lm_head has its own packed one).
  TensorView embedding_;
  std::shared_ptr<const void> storage_;  // keeps the bytes behind embedding_ alive
  std::vector<CpuLayer> layers_;
  Weights final_norm_;  // (dim) or empty (post-norm encoders)
  PackedMatrix lm_head_;  // (vocab, dim), packed (a copy of the embedding when tied); empty for an encoder
  TensorView position_embedding_;  // (positions, dim) as stored, rows converted when looked up; or empty
  Weights token_type_rows_;        // (types, dim) the embeddings of token types 0 and 1 (when there), or empty
  int num_token_types_ = 0;
  Weights pooler_, pooler_bias_;   // (dim, dim), (dim): a cross-encoder's head, else empty
  Weights classifier_, classifier_bias_;  // (num_labels, dim), (num_labels)
  Weights embedding_norm_;         // (dim) or empty
  Weights embedding_norm_bias_;    // (dim) or empty
  // RoPE tables: global or local layers (Gemma 3's own base), positions below or from longrope's
  // original_max_position. Sets a model does not use are computed anyway (cheap) and never read.
  static constexpr int kLocal = 1, kLongRange = 2, kRopeSets = 4;
  std::vector<float> inv_freq_[kRopeSets];  // (head_dim / 2) each
  int64_t matrix_bytes_ = 0;       // memory of the packed matrices
  int64_t matrix_params_ = 0;      // their parameters
  double expert_bytes_ = 0;        // the routed experts' bytes as stored (not the panels' memory)
  double expert_params_ = 0;       // their parameters

  KvCacheSpec spec_;
  KvElement kv_element_ = KvElement::kF32;
  // Elements of kv_element_: K (layers, num_blocks, kv_dim, block_size), V (layers, num_blocks *
  // block_size, kv_dim) (PagedKv).
  ZeroedBytes k_cache_;
  ZeroedBytes v_cache_;

  // Activations, resized to the batch: T = rows of the batch.
  std::vector<float> x_;           // (T, dim) residual stream
  std::vector<float> h_;           // (T, dim) normalized input of a sublayer
  std::vector<float> qkv_;         // (T, q_dim + 2 * kv_dim)
  std::vector<float> att_;         // (T, q_dim)
  std::vector<float> gate_up_;     // (T, 2 * hidden)
  std::vector<float> ff_;          // (T, hidden)
  std::vector<float> delta_;       // (T, dim) sublayer output before the residual add
  std::vector<float> rope_cos_[2];  // (T, head_dim / 2) of global and of local layers
  std::vector<float> rope_sin_[2];  // (T, head_dim / 2)
  std::vector<int32_t> row_seq_;   // (T) sequence of each row
  MoeScratch moe_scratch_;         // sparse layers' routing and per-expert buffers
  CpuLoraSet lora_;                // the LoRA adapters' packed pairs
  std::vector<int32_t> row_lora_;  // (T) adapter of each row, 0 = none
  std::vector<LoraGroup> lora_groups_;  // the step's rows grouped by adapter
};

void CpuBackend::load_weights(const ModelTensors& t) {
  const Packing keep{options_.keep_blocks, options_.int8_products, options_.int8_planes};
  embedding_ = t.embedding;
  for (const LayerTensors& l : t.layers) {
    CpuLayer layer;
    const float offset = config_.norm_offset;
    layer.attn_norm = norm_weights(l.attn_norm, offset, pool_);
    layer.attn_norm_bias = norm_weights(l.attn_norm_bias, 0.0f, pool_);
    layer.ffn_norm_bias = norm_weights(l.ffn_norm_bias, 0.0f, pool_);
    layer.wqkv = pack_stacked({&l.wq, &l.wk, &l.wv}, pool_, keep);
    if (config_.qkv_bias) {  // (q_dim + 2 * kv_dim): the three bias vectors end to end
      for (const TensorView* b : {&l.bq, &l.bk, &l.bv}) {
        const Weights part = stack_f32({b}, pool_);
        layer.qkv_bias.insert(layer.qkv_bias.end(), part.begin(), part.end());
      }
    }
    layer.q_norm = norm_weights(l.q_norm, offset, pool_);
    layer.k_norm = norm_weights(l.k_norm, offset, pool_);
    layer.wo = pack_stacked({&l.wo}, pool_, keep);
    if (!l.bo.empty()) layer.o_bias = stack_f32({&l.bo}, pool_);
    if (!l.sinks.empty()) layer.sinks = stack_f32({&l.sinks}, pool_);
    layer.post_attn_norm = norm_weights(l.post_attn_norm, offset, pool_);
    layer.ffn_norm = norm_weights(l.ffn_norm, offset, pool_);
    layer.post_ffn_norm = norm_weights(l.post_ffn_norm, offset, pool_);
    if (l.router.empty() && !config_.gated_ffn) {
      layer.w_gate_up = pack_stacked({&l.w_up}, pool_, keep);
      layer.up_bias = norm_weights(l.b_up, 0.0f, pool_);
      layer.w_down = pack_stacked({&l.w_down}, pool_, keep);
      layer.down_bias = norm_weights(l.b_down, 0.0f, pool_);
    } else if (l.router.empty()) {
      layer.w_gate_up = pack_stacked({&l.w_gate, &l.w_up}, pool_, keep);
      layer.w_down = pack_stacked({&l.w_down}, pool_, keep);
    } else {
      load_experts(l, layer.moe);
    }
    for (const PackedMatrix* w : {&layer.wqkv, &layer.wo, &layer.w_gate_up, &layer.w_down}) count_weights(*w);
    layers_.push_back(std::move(layer));
  }
  final_norm_ = norm_weights(t.final_norm, config_.norm_offset, pool_);
  position_embedding_ = t.position_embedding;
  if (!t.token_type_embedding.empty()) {
    num_token_types_ = static_cast<int>(std::min<int64_t>(2, t.token_type_embedding.rows));
    token_type_rows_.resize(static_cast<size_t>(num_token_types_) * config_.dim);
    tensor_rows_to_f32(t.token_type_embedding, 0, num_token_types_, token_type_rows_.data());
  }
  if (config_.is_cross_encoder()) {
    pooler_ = stack_f32({&t.pooler}, pool_);
    pooler_bias_ = stack_f32({&t.pooler_bias}, pool_);
    classifier_ = stack_f32({&t.classifier}, pool_);
    classifier_bias_ = stack_f32({&t.classifier_bias}, pool_);
  }
  embedding_norm_ = norm_weights(t.embedding_norm, config_.norm_offset, pool_);
  embedding_norm_bias_ = norm_weights(t.embedding_norm_bias, 0.0f, pool_);
  if (t.lm_head.empty()) return;  // an encoder
  lm_head_ = pack_stacked({&t.lm_head}, pool_, keep);  // the embedding view when tied
  count_weights(lm_head_);
}

// A sparse layer's router, experts (gate|up stacked per expert, as the dense FFN) and shared expert.
void CpuBackend::load_experts(const LayerTensors& l, MoeWeights& moe) {
  const Packing keep{options_.keep_blocks, options_.int8_products, options_.int8_planes};
  // The router stays exact: an expert choice flipped by rounding would change the output far more.
  moe.router = pack_stacked({&l.router}, pool_, {keep.keep_blocks, false});
  count_weights(moe.router);
  auto f32 = [&](std::initializer_list<const TensorView*> parts) {
    const Weights w = stack_f32(parts, pool_);
    return std::vector<float>(w.begin(), w.end());
  };
  if (!l.router_bias.empty()) moe.router_bias = f32({&l.router_bias});
  for (const ExpertTensors& e : l.experts) {
    moe.gate_up.push_back(pack_stacked({&e.gate, &e.up}, pool_, keep));
    moe.down.push_back(pack_stacked({&e.down}, pool_, keep));
    if (!e.gate_bias.empty()) {  // (1, width) each: stacked as one row of [gate | up]
      std::vector<float> gate_up = f32({&e.gate_bias});
      const std::vector<float> up = f32({&e.up_bias});
      gate_up.insert(gate_up.end(), up.begin(), up.end());
      moe.gate_up_bias.push_back(std::move(gate_up));
      moe.down_bias.push_back(f32({&e.down_bias}));
    }
    count_expert_weights(moe.gate_up.back());
    count_expert_weights(moe.down.back());
  }
  if (l.shared_expert_gate.empty()) return;
  const ExpertTensors& shared = l.shared_expert;
  moe.shared_gate_up = pack_stacked({&shared.gate, &shared.up}, pool_, keep);
  moe.shared_down = pack_stacked({&shared.down}, pool_, keep);
  const Weights gate = stack_f32({&l.shared_expert_gate}, pool_);
  moe.shared_gate.assign(gate.begin(), gate.end());
  count_weights(moe.shared_gate_up);
  count_weights(moe.shared_down);
}

void CpuBackend::resize_activations(int num_tokens) {
  const size_t n = static_cast<size_t>(num_tokens);
  x_.resize(n * config_.dim);
  h_.resize(n * config_.dim);
  qkv_.resize(n * (config_.q_dim() + 2 * config_.kv_dim()));
  att_.resize(n * config_.q_dim());
  gate_up_.resize(n * 2 * config_.hidden_dim);
  ff_.resize(n * config_.hidden_dim);
  delta_.resize(n * config_.dim);
  for (int set = 0; set < 2; ++set) {
    rope_cos_[set].resize(n * config_.head_dim / 2);
    rope_sin_[set].resize(n * config_.head_dim / 2);
  }
  row_seq_.resize(n);
}

// The residual stream's first value of every row: the token's embedding (scaled), plus its learned
// position and token type 0 and the embedding norm where the family has them.
void CpuBackend::embed_rows(const RaggedBatch& batch) {
  const int dim = config_.dim;
  std::vector<float> position(static_cast<size_t>(dim));  // (dim)
  for (int r = 0; r < batch.num_tokens(); ++r) {
    const int32_t token = batch.token_ids[r];
    if (token < 0 || token >= config_.vocab_size) throw Error("token id " + std::to_string(token) + " outside the vocabulary");
    float* x = x_.data() + static_cast<int64_t>(r) * dim;
    tensor_rows_to_f32(embedding_, token, 1, x);
    if (config_.embedding_scale != 1.0f) {
      for (int i = 0; i < dim; ++i) x[i] *= config_.embedding_scale;
    }
    if (!position_embedding_.empty()) {
      const int64_t row = position_row(batch, r);
      if (row >= position_embedding_.rows) throw Error("position " + std::to_string(batch.positions[r]) + " past the position table");
      tensor_rows_to_f32(position_embedding_, row, 1, position.data());
      for (int i = 0; i < dim; ++i) x[i] += position[i];
    }
    if (num_token_types_ > 0) {
      const int type = batch.token_type(row_seq_[r], r);
      if (type >= num_token_types_) throw Error("token type " + std::to_string(type) + " past the model's token types");
      const float* type_row = &token_type_rows_[static_cast<size_t>(type) * dim];
      for (int i = 0; i < dim; ++i) x[i] += type_row[i];
    }
    if (!embedding_norm_.empty()) norm_row(x, embedding_norm_, embedding_norm_bias_, x);
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

// The family's norm of one row (dim): LayerNorm with bias, or RMSNorm. out may be x.
void CpuBackend::norm_row(const float* x, const Weights& weight, const Weights& bias, float* out) const {
  if (config_.layer_norm) {
    layernorm_row(x, weight.data(), bias.data(), out, config_.dim, config_.rms_eps);
  } else {
    rmsnorm_row(x, weight.data(), out, config_.dim, config_.rms_eps);
  }
}

// The last cache position row r attends: its own (causal), or its sequence's last (bidirectional).
int CpuBackend::attention_extent(const RaggedBatch& batch, int64_t row) const {
  return config_.bidirectional ? batch.seq_lens[row_seq_[row]] - 1 : batch.positions[row];
}

void CpuBackend::forward(const RaggedBatch& batch, StepOutput& out) {
  const int num_tokens = batch.num_tokens();
  const int half = config_.head_dim / 2;
  resize_activations(num_tokens);
  copy_blocks(batch);
  for (int s = 0; s < batch.num_seqs(); ++s) {
    std::fill(row_seq_.begin() + batch.query_start[s], row_seq_.begin() + batch.query_start[s + 1], s);
  }
  group_rows_by_adapter(batch);
  embed_rows(batch);
  const bool has_local = config_.rope_theta_local > 0.0f;
  const RopeScaling& scaling = config_.rope_scaling;
  for (int r = 0; r < num_tokens && !config_.learned_positions; ++r) {
    const int pos = batch.positions[r];
    const bool long_range = scaling.type == RopeScalingType::kLongrope && pos >= scaling.original_max_position;
    for (int set = 0; set < (has_local ? 2 : 1); ++set) {
      const std::vector<float>& inv_freq = inv_freq_[(set ? kLocal : 0) | (long_range ? kLongRange : 0)];
      float* c = &rope_cos_[set][r * half];
      float* s = &rope_sin_[set][r * half];
      rope_angles(pos, inv_freq.data(), config_.head_dim, c, s);
      const float factor = rope_attention_factor(config_, set == 1);
      for (int i = 0; factor != 1.0f && i < half; ++i) c[i] *= factor, s[i] *= factor;
    }
  }
  int experts_touched = 0;
  for (int l = 0; l < config_.num_layers; ++l) {
    attention_layer(batch, l);
    experts_touched += ffn_layer(num_tokens, l);
  }
  out.experts_touched = config_.is_moe() ? experts_touched : -1;
  pool_rows(batch, x_.data(), config_.dim, final_norm_.empty() ? nullptr : final_norm_.data(), config_.rms_eps, out.pooled);
  if (config_.is_cross_encoder()) {
    const ClassifierHead head{pooler_.data(), pooler_bias_.data(), classifier_.data(), classifier_bias_.data(),
                              config_.num_labels};
    classify_rows(head, config_.dim, batch.num_pooled(), out.pooled);
  }
  compute_logits(batch, out);
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

// Copy-on-write: every layer's K and V of each source block into its destination, before the step writes.
void CpuBackend::copy_blocks(const RaggedBatch& batch) {
  const size_t block_bytes = static_cast<size_t>(spec_.block_size) * config_.kv_dim() * kv_element_bytes(kv_element_);
  const size_t layer_bytes = block_bytes * spec_.num_blocks;
  for (int c = 0; c < batch.num_block_copies(); ++c) {
    const int32_t src = batch.block_copies[2 * c], dst = batch.block_copies[2 * c + 1];
    if (src < 0 || dst < 0 || src >= spec_.num_blocks || dst >= spec_.num_blocks) {
      throw Error("block copy " + std::to_string(src) + " -> " + std::to_string(dst) + " outside the KV cache");
    }
    for (int l = 0; l < config_.num_layers; ++l) {
      for (uint8_t* cache : {k_cache_.get(), v_cache_.get()}) {
        uint8_t* layer = cache + l * layer_bytes;
        std::memcpy(layer + dst * block_bytes, layer + src * block_bytes, block_bytes);
      }
    }
  }
}

// The calling thread's attention scratch, at least `count` floats: grown to the longest context seen,
// then reused (no allocation per layer and step).
float* attention_scratch(int64_t count) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(count)) scratch.resize(static_cast<size_t>(count));
  return scratch.data();
}

// Norm, fused QKV product, biases, q/k norms, RoPE (the layer's own table), and K/V into the cache.
void CpuBackend::qkv_projection(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = layers_[l];
  const int num_tokens = batch.num_tokens();
  const int dim = config_.dim, hd = config_.head_dim, q_dim = config_.q_dim(), kv_dim = config_.kv_dim();
  const int qkv_dim = q_dim + 2 * kv_dim;
  const int64_t layer_offset = static_cast<int64_t>(l) * spec_.num_blocks * spec_.block_size * kv_dim;
  if (!config_.post_norm) {  // pre-norm: the sublayer reads norm(x); post-norm: x itself
    pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) rmsnorm_row(&x_[r * dim], layer.attn_norm.data(), &h_[r * dim], dim, config_.rms_eps);
    }, 1, min_parallel_items(0.5 * dim));
  }
  const float* input = config_.post_norm ? x_.data() : h_.data();
  matmul(input, layer.wqkv, qkv_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kQkv, l, lora_groups_, input, dim, qkv_.data(), qkv_dim, pool_);
  const int rope_set = config_.uses_local_rope(l) ? 1 : 0;
  for (int r = 0; r < num_tokens; ++r) {
    float* q = &qkv_[static_cast<int64_t>(r) * qkv_dim];
    if (!layer.qkv_bias.empty()) {
      for (int i = 0; i < qkv_dim; ++i) q[i] += layer.qkv_bias[i];
    }
    if (config_.qk_norm_whole) {  // OLMoE: one norm over all of q, one over all of k
      rmsnorm_row(q, layer.q_norm.data(), q, q_dim, config_.rms_eps);
      rmsnorm_row(q + q_dim, layer.k_norm.data(), q + q_dim, kv_dim, config_.rms_eps);
    } else if (!layer.q_norm.empty()) {
      for (int h = 0; h < config_.num_heads; ++h) rmsnorm_row(q + h * hd, layer.q_norm.data(), q + h * hd, hd, config_.rms_eps);
      for (int h = 0; h < config_.num_kv_heads; ++h) {
        float* k = q + q_dim + h * hd;
        rmsnorm_row(k, layer.k_norm.data(), k, hd, config_.rms_eps);
      }
    }
    const float* c = &rope_cos_[rope_set][r * hd / 2];
    const float* s = &rope_sin_[rope_set][r * hd / 2];
    for (int h = 0; h < config_.num_heads + config_.num_kv_heads && !config_.learned_positions; ++h) {
      rope_head(q + h * hd, hd, c, s, config_.rope_layout);
    }
    const int32_t slot = batch.slot_mapping[r];
    if (slot < 0) continue;
    store_kv(q + q_dim, layer_offset, slot);
  }
}

// One row's K and V (kv_dim each, end to end at kv) into the cache at slot of the layer at layer_offset
// (elements): V as the slot's row, K spread over its block's element rows (k_cache_index).
void CpuBackend::store_kv(const float* kv, int64_t layer_offset, int32_t slot) {
  const int kv_dim = config_.kv_dim(), bs = spec_.block_size;
  const int64_t v_at = layer_offset + static_cast<int64_t>(slot) * kv_dim;
  if (kv_element_ == KvElement::kBf16) {
    auto* k = reinterpret_cast<uint16_t*>(k_cache_.get()) + layer_offset;
    auto* v = reinterpret_cast<uint16_t*>(v_cache_.get()) + v_at;
    for (int i = 0; i < kv_dim; ++i) k[k_cache_index(slot, i, kv_dim, bs)] = f32_to_bf16(kv[i]);
    for (int i = 0; i < kv_dim; ++i) v[i] = f32_to_bf16(kv[kv_dim + i]);
  } else {
    auto* k = reinterpret_cast<float*>(k_cache_.get()) + layer_offset;
    for (int i = 0; i < kv_dim; ++i) k[k_cache_index(slot, i, kv_dim, bs)] = kv[i];
    std::copy_n(kv + kv_dim, kv_dim, reinterpret_cast<float*>(v_cache_.get()) + v_at);
  }
}

void CpuBackend::attention_layer(const RaggedBatch& batch, int l) {
  const CpuLayer& layer = layers_[l];
  const int num_tokens = batch.num_tokens();
  const int hd = config_.head_dim, q_dim = config_.q_dim(), kv_dim = config_.kv_dim();
  const int qkv_dim = q_dim + 2 * kv_dim;
  const int64_t layer_offset = static_cast<int64_t>(l) * spec_.num_blocks * spec_.block_size * kv_dim;
  qkv_projection(batch, l);
  const int element_bytes = kv_element_bytes(kv_element_);
  const PagedKv cache{k_cache_.get() + layer_offset * element_bytes, v_cache_.get() + layer_offset * element_bytes,
                      kv_dim, spec_.block_size, kv_element_};
  const AttentionParams params{hd, config_.query_scale(), config_.attn_softcap, config_.window(l),
                               layer.sinks.empty() ? nullptr : layer.sinks.data()};
  const int num_heads = config_.num_heads;
  const int group = num_heads / config_.num_kv_heads;
  auto table_of = [&](int64_t r) {
    return &batch.block_tables[static_cast<int64_t>(row_seq_[r]) * batch.max_blocks_per_seq];
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
        attend_rows(&qkv_[r * qkv_dim], qkv_dim, cache, table_of(r), pos, count, num_heads, config_.num_kv_heads,
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
  matmul(att_.data(), layer.wo, delta_.data(), num_tokens, pool_);
  if (!layer.o_bias.empty()) {
    for (int64_t r = 0; r < num_tokens; ++r) {
      for (int i = 0; i < config_.dim; ++i) delta_[r * config_.dim + i] += layer.o_bias[i];
    }
  }
  lora_.add(LoraProduct::kO, l, lora_groups_, att_.data(), q_dim, delta_.data(), config_.dim, pool_);
  add_sublayer_output(num_tokens, layer.post_attn_norm, layer.attn_norm, layer.attn_norm_bias);
}

// x += delta, through the sublayer's output norm first where the family has one (Gemma's sandwich); with
// post_norm, x = norm(x + delta) by the sublayer's own norm (norm, norm_bias).
void CpuBackend::add_sublayer_output(int num_tokens, const Weights& post_norm, const Weights& norm,
                                     const Weights& norm_bias) {
  const int dim = config_.dim;
  if (!post_norm.empty()) {
    pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) rmsnorm_row(&delta_[r * dim], post_norm.data(), &delta_[r * dim], dim, config_.rms_eps);
    }, 1, min_parallel_items(0.5 * dim));
  }
  for (size_t i = 0; i < static_cast<size_t>(num_tokens) * dim; ++i) x_[i] += delta_[i];
  if (!config_.post_norm) return;
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) norm_row(&x_[r * dim], norm, norm_bias, &x_[r * dim]);
  }, 1, min_parallel_items(0.5 * dim));
}

int CpuBackend::ffn_layer(int num_tokens, int l) {
  const CpuLayer& layer = layers_[l];
  const int dim = config_.dim, hidden = config_.hidden_dim;
  if (config_.post_norm) {
    plain_ffn(num_tokens, layer);
    return 0;
  }
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rmsnorm_row(&x_[r * dim], layer.ffn_norm.data(), &h_[r * dim], dim, config_.rms_eps);
  }, 1, min_parallel_items(0.5 * dim));
  if (!layer.moe.gate_up.empty()) {
    const MoeRouting routing{config_.num_experts, config_.experts_per_token, config_.norm_topk_prob,
                             config_.moe_router};
    const int touched = moe_ffn(h_.data(), num_tokens, dim, layer.moe, routing, glu_params(config_), pool_,
                                moe_scratch_, delta_.data());
    add_sublayer_output(num_tokens, layer.post_ffn_norm, layer.ffn_norm, layer.ffn_norm_bias);
    return touched;
  }
  matmul(h_.data(), layer.w_gate_up, gate_up_.data(), num_tokens, pool_);
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
  matmul(ff_.data(), layer.w_down, delta_.data(), num_tokens, pool_);
  lora_.add(LoraProduct::kDown, l, lora_groups_, ff_.data(), hidden, delta_.data(), dim, pool_);
  add_sublayer_output(num_tokens, layer.post_ffn_norm, layer.ffn_norm, layer.ffn_norm_bias);
  return 0;
}

// A post-norm plain FFN (BERT): x = norm(x + down(act(up x + b_up)) + b_down).
void CpuBackend::plain_ffn(int num_tokens, const CpuLayer& layer) {
  const int dim = config_.dim, hidden = config_.hidden_dim;
  if (config_.gated_ffn || layer.up_bias.empty()) throw Error("internal error: a post-norm layer without a plain FFN");
  matmul(x_.data(), layer.w_gate_up, gate_up_.data(), num_tokens, pool_);
  pool_.parallel_for(num_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      plain_ffn_row(&gate_up_[r * hidden], layer.up_bias.data(), &ff_[r * hidden], hidden, config_.activation);
    }
  }, 1, min_parallel_items(10.0 * hidden));
  matmul(ff_.data(), layer.w_down, delta_.data(), num_tokens, pool_);
  for (int64_t r = 0; r < num_tokens; ++r) {
    for (int i = 0; i < dim; ++i) delta_[r * dim + i] += layer.down_bias[i];
  }
  add_sublayer_output(num_tokens, {}, layer.ffn_norm, layer.ffn_norm_bias);
}

// The final norm and the head of batch rows rows[0..n) (n <= the batch's rows): (n, vocab) logits.
void CpuBackend::head_rows(const int32_t* rows, int n, float* logits) {
  const int dim = config_.dim;
  for (int i = 0; i < n; ++i) {
    const int64_t r = rows[i];
    rmsnorm_row(&x_[r * dim], final_norm_.data(), &h_[static_cast<int64_t>(i) * dim], dim, config_.rms_eps);
  }
  matmul(h_.data(), lm_head_, logits, n, pool_);
  if (config_.final_softcap > 0.0f) softcap_row(logits, n * config_.vocab_size, config_.final_softcap);
}

void CpuBackend::compute_logits(const RaggedBatch& batch, StepOutput& out) {
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
  if (!out.want_logits) {
    out.token_ids.resize(n);
    pool_.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out.token_ids[i] = first_argmax(&out.logits[static_cast<size_t>(i) * vocab], vocab);
    }, 1, min_parallel_items(0.2 * vocab));
  }
  if (out.logprob_queries.empty()) return;
  const LogitsHead head = [this](const int32_t* rows, int count, float* logits) { head_rows(rows, count, logits); };
  answer_logprob_queries(batch, vocab, head, pool_, out);
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(model, options);
}

}  // namespace cbatch
