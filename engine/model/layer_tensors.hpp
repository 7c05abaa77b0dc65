// The tensor table: one row per kind of weight tensor (a layer's, a routed expert's, the model's), with
// its names in each format, its shape from the config, when a model has it, its role (how the backends
// keep it, how dummy weights draw it) and the product it joins. The loaders, the shape checks and both
// backends loop over these rows, as llama.cpp keeps its tensor names: a new kind is a row here and the
// forward code that reads it. Shapes are (rows, cols), row-major; a vector is (1, n).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/model/model_config.hpp"

namespace cbatch {

// A layer's tensors, in the order dummy weights draw their seeds (dummy_model.cpp): a new kind goes
// before kCount, so that every model's existing seeds are unchanged. A sparse layer's routed experts
// draw theirs right after its router's rows.
enum class LayerTensor : uint8_t {
  kAttnNorm, kWq, kWk, kWv, kWo, kFfnNorm,
  kGate, kUp, kDown,                                         // the dense FFN
  kRouter, kRouterBias, kSharedGate, kSharedUp, kSharedDown, kSharedExpertGate,  // a sparse layer's
  kBq, kBk, kBv, kQNorm, kKNorm, kPostAttnNorm, kPostFfnNorm, kBo, kSinks,
  kAttnNormBias, kFfnNormBias, kUpBias, kDownBias,           // encoders (LayerNorm, plain FFN)
  // A gated DeltaNet layer's (in place of the attention rows): the q|k|v, z, b and a projections, the causal
  // conv's taps, dt_bias, the decay (A_log or A), the gated norm and the output projection.
  kSsmQkv, kSsmZ, kSsmBeta, kSsmAlpha, kSsmConv, kSsmDtBias, kSsmDecay, kSsmNorm, kSsmOut,
  // A short-conv layer's (LFM2): the B|C|x in projection, the conv's taps, the output projection.
  kShortConvIn, kShortConvTaps, kShortConvOut,
  // A Mamba-2 layer's: the z|x|B|C|dt in projection, the conv's taps and bias, dt_bias, the decay (A_log or
  // A), the skip D, the gated norm, the output projection.
  kMambaIn, kMambaConv, kMambaConvBias, kMambaDtBias, kMambaDecay, kMambaD, kMambaNorm, kMambaOut,
  // Gemma 4's per-layer input (gate, projection, norm) and the layer's output scalar.
  kPerLayerGate, kPerLayerProj, kPerLayerNorm, kLayerScalar,
  // Gemma 4's MoE block beside the dense MLP: the router's input scale, each expert's output scale, and the
  // experts' pre-norm and the two outputs' norms.
  kRouterScale, kExpertScale, kPreFfnNorm2, kPostFfnNorm1, kPostFfnNorm2,
  kCount
};

// One routed expert's tensors (a sparse layer has num_experts of each).
enum class ExpertTensor : uint8_t { kGate, kUp, kDown, kGateBias, kUpBias, kDownBias, kCount };

// The model's tensors outside the layers; dummy weights draw kEmbedding before the layers, the rest after.
enum class ModelTensor : uint8_t {
  kEmbedding, kFinalNorm, kLmHead,
  kPositionEmbedding, kTokenTypeEmbedding, kEmbeddingNorm, kEmbeddingNormBias,  // encoders
  kPooler, kPoolerBias, kClassifier, kClassifierBias,                          // a cross-encoder's head
  kPerLayerEmbedding, kPerLayerModelProj, kPerLayerProjNorm,                   // Gemma 4's per-layer inputs
  kCount
};

// The backends fuse rows into one product (q|k|v, gate|up, their biases): a product is kept under the
// kind of its first row, and its parts are stacked in table order (rows of matrices, values of vectors).
// A plain FFN (no gate) has its up projection alone under kGateUp.
struct LayerProduct {
  static constexpr LayerTensor kQkv = LayerTensor::kWq;              // (q_proj_dim + 2 * kv_dim, dim)
  static constexpr LayerTensor kQkvBias = LayerTensor::kBq;          // (q_dim + 2 * kv_dim)
  static constexpr LayerTensor kGateUp = LayerTensor::kGate;         // (2 * hidden_dim, dim)
  static constexpr LayerTensor kSharedGateUp = LayerTensor::kSharedGate;  // (2 * shared_expert_hidden_dim, dim)
  // A DeltaNet layer's input projections: (conv_dim + value_dim, dim) rows [q|k|v | z], and (2 * num_v_heads,
  // dim) rows [b | a] (each grouped by key head in Qwen3-Next's files: DeltaNetSizes::grouped_*).
  static constexpr LayerTensor kSsmQkvz = LayerTensor::kSsmQkv;
  static constexpr LayerTensor kSsmBa = LayerTensor::kSsmBeta;
};
struct ExpertProduct {
  static constexpr ExpertTensor kGateUp = ExpertTensor::kGate;          // (2 * expert_hidden_dim, dim)
  static constexpr ExpertTensor kGateUpBias = ExpertTensor::kGateBias;  // (2 * expert_hidden_dim)
};

// An array with one item per kind (the tensors of a layer, a backend's products).
template <typename Kind, typename T>
struct ByKind {
  std::array<T, static_cast<size_t>(Kind::kCount)> items;
  T& operator[](Kind kind) { return items[static_cast<size_t>(kind)]; }
  const T& operator[](Kind kind) const { return items[static_cast<size_t>(kind)]; }
};

// A dimension of a shape, from the config.
enum class Size : uint8_t {
  kOne, kDim, kQDim, kKvDim, kHidden, kNumHeads,
  kQNorm,  // head_dim, or q_dim with qk_norm_whole (OLMoE)
  kKNorm,  // head_dim, or kv_dim with qk_norm_whole
  kNumExperts, kExpertHidden, kSharedHidden, kVocab,
  kPositions,   // max_context + position_offset
  kTokenTypes,  // num_token_types (config.json type_vocab_size)
  kNumLabels,
  kQProj,         // q_proj_dim(): q_dim, doubled by the attention output gate
  kSsmConvDim,    // a DeltaNet layer's conv channels (q, k and v)
  kSsmValueDim,   // num_v_heads * v_head_dim
  kSsmVHeads,     // num_v_heads
  kSsmVHeadDim,   // v_head_dim
  kSsmConvKernel,  // the conv's taps
  kShortConvIn,      // 3 * dim: a short conv's B|C|x
  kShortConvKernel,  // its taps
  kMambaInProj,      // Mamba2Sizes::in_proj_dim()
  kMambaConvDim,     // its conv channels (x|B|C)
  kMambaHeads,
  kMambaInner,       // heads * head_dim
  kMambaConvKernel,
  kPerLayerDim,    // per_layer_dim (Gemma 4's per-layer inputs)
  kPerLayerAll,    // num_layers * per_layer_dim
};
struct Shape {
  Size rows = Size::kOne;
  Size cols = Size::kOne;
};
// With a layer, that layer's own value where layers differ (Gemma 4's global layers' head size and K/V
// heads, double-wide FFNs); without (-1), the model's default.
int64_t size_of(Size size, const ModelConfig& config, int layer = -1);

// What a tensor is for, which says how each backend keeps it and how dummy weights draw it.
enum class Role : uint8_t {
  kEmbedding,     // a table looked up by rows: kept as stored; drawn with scale 1
  kProjection,    // a layer projection or the lm_head: packed (CPU, 8-bit where asked), FP8 where asked (CUDA)
  kRouter,        // a router: kept exact (never 8-bit or FP8: a flipped choice would change the output more)
  kSharedExpert,  // the shared expert's projections: as kProjection on the CPU, in T on CUDA
  kRoutedExpert,  // a routed expert's matrix: kept in its blocks where the expert products read them
  kNorm,          // a norm weight, applied as (norm_offset + w): Hugging Face Gemma stores w with offset 1,
                  // llama.cpp's converter stores 1 + w (offset 0); drawn near 1 whatever the offset
  kBias,          // a vector added as it is (biases, sinks), fp32
  kGateVector,    // a (1, dim) vector dotted with each row (the shared expert's gate): fp32, drawn as a
                  // projection of one output
  kDense,         // a small fp32 matrix (the CPU's head: pooler, classifier; a conv's taps): drawn as a projection
  kPlainNorm,     // a norm weight applied as it is, never with norm_offset (a DeltaNet's gated norm): fp32, drawn near 1
  kDecay,         // a recurrent layer's decay rate A per head, fp32: stored as A_log (ModelConfig::decay_from_log:
                  // A = -exp(A_log)) or as A; drawn as A_log near 0
};

// A row's names in a format, the first the one an error names; a loader takes the first one the file has
// that no other row took (Mixtral's and gpt-oss's router, gpt-oss's GGUF FFN norm are alternates).
using Spellings = std::array<std::string_view, 5>;

// A name of the Hugging Face model's own tensors: under the checkpoint's model prefix ("model.", "bert.",
// "roberta.", "backbone.", "" for a bare encoder), or at its root (the heads); `others` are the names some
// families use instead (LFM2's embedding_norm, Nemotron-H's norm_f), taken when `name` is not there.
struct HfName {
  std::string_view name;
  bool at_root = false;
  std::array<std::string_view, 2> others{};
};

struct LayerTensorRow {
  LayerTensor kind;
  std::string_view label;  // in messages: "q bias"
  Shape shape;
  bool (*present)(const ModelConfig& config, int layer);  // the model has it; absent rows are empty views
  Role role;
  LayerTensor joins;       // the first row of the product it is stacked into (its own kind when alone)
  Spellings gguf;          // under "blk.N."
  Spellings hf;            // under "<prefix>layers.N." (decoders)
  std::string_view bert;   // under "<prefix>encoder.layer.N." (BERT, XLM-R)
  std::string_view llama2c;  // the checkpoint's array, under "layers.N."
};

// A routed expert's rows: per expert in Hugging Face files and in older Mixtral GGUF files ("{e}" is the
// expert's number), stacked in llama.cpp's GGUF files (ggml dims [cols, rows, num_experts], or [cols,
// num_experts] for a vector) and split into per-expert views at load; gpt-oss's Hugging Face experts are
// stacked their own way (hf_stacked_experts.hpp: `hf_stacked`, gate and up interleaved in one tensor).
struct ExpertTensorRow {
  ExpertTensor kind;
  std::string_view label;
  Shape shape;
  bool (*present)(const ModelConfig& config);
  Role role;
  ExpertTensor joins;
  std::string_view gguf;            // stacked, under "blk.N."
  std::string_view gguf_per_expert;  // one tensor per expert, or "" when only stacked
  Spellings hf;                     // under "<prefix>layers.N.", per expert; the spelling the router took
  std::string_view hf_stacked;      // gpt-oss, under "<prefix>layers.N.mlp.experts."
  std::string_view hf_stacked_other = "";  // Granite 4.0-H's block_sparse_moe (transformers 5's layout)
};

struct ModelTensorRow {
  ModelTensor kind;
  std::string_view label;
  Shape shape;
  bool (*present)(const ModelConfig& config);
  Role role;
  std::string_view gguf;
  HfName hf;                // decoders
  HfName bert;              // encoders
  HfName roberta;           // XLM-R where it differs from BERT (its classification head); empty otherwise
  std::string_view llama2c;
  std::string_view gguf_other = "";  // the GGUF name some families use instead (LFM2's token_embd_norm)
};

// A product some files store as one tensor (Phi-3's qkv_proj and gate_up_proj; llama.cpp puts Phi-3's
// gate and up in ffn_up; Qwen3-Next's in_proj_qkvz and in_proj_ba): when its first row's own tensor is not there, its parts are read as row slices
// of it, in table order.
struct FusedTensorRow {
  LayerTensor product;  // the first row of the product
  std::string_view gguf;
  std::string_view hf;
};

// A table's rows in order (std::span's part; nvcc's C++17 reads this header too).
template <typename Row>
struct Rows {
  const Row* first = nullptr;
  size_t count = 0;
  const Row* begin() const { return first; }
  const Row* end() const { return first + count; }
  const Row& front() const { return *first; }
};

Rows<LayerTensorRow> layer_tensor_rows();
Rows<ExpertTensorRow> expert_tensor_rows();
Rows<ModelTensorRow> model_tensor_rows();
Rows<FusedTensorRow> fused_tensor_rows();
const LayerTensorRow& layer_row(LayerTensor kind);
const ExpertTensorRow& expert_row(ExpertTensor kind);
const ModelTensorRow& model_row(ModelTensor kind);

// A per-expert name with "{e}" replaced by the expert's number.
std::string expert_name(std::string_view pattern, int expert);

}  // namespace cbatch
