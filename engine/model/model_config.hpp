// The architecture facts of a model, read from whichever file format it came in: the sizes, and the
// family description (what differs from Llama: norms, biases, q/k norm, activation, softcaps, windows,
// RoPE bases). One forward per backend reads these fields; a family is a row of values, not a copy of it.
// Immutable after load; backends and the engine read it, nobody writes derived values back.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/recurrent_sizes.hpp"

namespace cbatch {

// Which pairs of a head's dimensions RoPE rotates together. llama2.c and GGUF `llama` files rotate
// adjacent pairs (2i, 2i+1); Hugging Face checkpoints and the other GGUF architectures rotate halves
// (i, i + head_dim/2). A property of the weights.
enum class RopeLayout : uint8_t { kAdjacentPairs, kHalves };

enum class RopeScalingType : uint8_t { kNone, kLinear, kLlama3, kYarn, kLongrope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;     // llama3
  float high_freq_factor = 4.0f;    // llama3
  int original_max_position = 8192;  // llama3, yarn, longrope
  float beta_fast = 32.0f;          // yarn
  float beta_slow = 1.0f;           // yarn
  bool truncate = true;             // yarn: correction range rounded out to whole dims (gpt-oss: false)
  std::vector<float> short_factor;  // longrope: (head_dim / 2) frequency divisors below original_max_position
  std::vector<float> long_factor;   // longrope: (head_dim / 2) frequency divisors from original_max_position on
  float attention_factor = 1.0f;    // yarn, longrope: multiplies cos and sin (1 = none)
};

// The gate activation of the gated FFN: SwiGLU (silu), GeGLU (GELU, tanh approximation), or gpt-oss's
// clamped SwiGLU: gate clamped above at swiglu_limit, up to [-swiglu_limit, swiglu_limit], and
// out = (up + 1) * gate * sigmoid(swiglu_alpha * gate). A plain FFN (gated_ffn false) applies it to the
// up projection alone; kGeluErf is the exact GELU, x/2 (1 + erf(x / sqrt 2)) (HF "gelu": BERT).
// kRelu2 is relu(x)^2 (Nemotron-H's plain MLP).
enum class Activation : uint8_t { kSilu, kGeluTanh, kSwigluClamped, kGeluErf, kRelu2 };

// What mixes a layer's positions (its "mixer"; the FFN follows every kind unless single_sublayer). Attention
// keeps K/V in the paged cache; the recurrent kinds keep a fixed-size state per sequence instead (a
// convolution window and a recurrent matrix: the backend's state slots, LayerState). A new kind is a value
// here, its tensor rows and one small forward file per backend.
enum class LayerKind : uint8_t {
  kAttention,  // causal (or bidirectional) attention over the paged KV cache
  kDeltaNet,   // gated DeltaNet (Qwen3.5, Qwen3-Next): causal conv, L2-normed q/k, the delta rule, gated norm
  kShortConv,  // LFM2: in projection into B, C, x; B * x through a causal depthwise conv; C * conv; out projection
  kMamba2,     // Granite 4.0-H, Nemotron-H: conv over x|B|C (SiLU), the selective scan, gated grouped norm
  kMlp,        // no mixer: the layer is its FFN alone (Nemotron-H's '-' layers)
};
// "attention", "gated DeltaNet", "short conv", "Mamba-2", "MLP", for messages and inspect.
std::string_view layer_kind_name(LayerKind kind);

// What a recurrent layer keeps per sequence (floats): its conv window ((conv_kernel - 1, channels), oldest
// first), then its recurrent matrices. Zero for attention and MLP layers.
struct LayerState {
  int64_t conv_floats = 0;
  int64_t recurrent_floats = 0;
};

// How a sparse layer's router picks experts from its logits: softmax over all experts then the top k
// (Mixtral, Qwen-MoE, OLMoE), or the top k logits then a softmax over those k (gpt-oss).
enum class MoeRouter : uint8_t { kSoftmaxTopk, kTopkSoftmax };

struct ModelConfig {
  std::string architecture = "llama";  // the family: llama, qwen2, qwen3, mistral, gemma2, gemma3, phi3, MoE ones
  int dim = 0;               // hidden size
  int hidden_dim = 0;        // FFN intermediate size
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;          // dim / num_heads unless the config says otherwise (Gemma, Qwen3)
  int vocab_size = 0;
  int max_context = 0;       // positions the model supports (prompt + generated)
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  RopeLayout rope_layout = RopeLayout::kAdjacentPairs;
  bool tied_embeddings = false;

  // The family description (Llama's values by default).
  float norm_offset = 0.0f;        // RMSNorm scales by (norm_offset + w): 1 for Gemma's and Qwen3.5's HF weights (GGUF stores 1 + w)
  bool qkv_bias = false;           // q, k and v projections have biases (Qwen2)
  bool qk_norm = false;            // RMSNorm of every q and k head before RoPE, weights (head_dim) (Qwen3, Gemma 3)
  bool sandwich_norms = false;     // RMSNorm of each sublayer's output before the residual add (Gemma 2, 3)
  Activation activation = Activation::kSilu;
  float embedding_scale = 1.0f;    // embedding rows are multiplied by it (Gemma: sqrt(dim))
  float attn_scale = 0.0f;         // scale of q.k; 0 means 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;       // scores become cap * tanh(score / cap) when > 0 (Gemma 2)
  float final_softcap = 0.0f;      // logits likewise (Gemma 2)
  std::vector<int> layer_window;   // (num_layers) or empty: keys a layer attends, its own included; 0 = all
  float rope_theta_local = 0.0f;   // RoPE base of windowed layers, unscaled (Gemma 3); 0: they use rope_theta
  bool qk_norm_whole = false;      // the q/k norm spans the whole projection, weights (q_dim), (kv_dim) (OLMoE)
  std::vector<uint8_t> layer_nope;  // (num_layers) 1 where q and k are not rotated (SmolLM3's NoPE layers); empty: none
  // Qwen3.5's attention: the q projection holds per head [q (head_dim) | gate (head_dim)], and the attention
  // output is multiplied by sigmoid(gate) before the output projection.
  bool attn_output_gate = false;
  int rotary_dim = 0;              // leading dims of a head RoPE rotates (halves of them paired); 0: head_dim

  // Gemma 4. Its unwindowed (global) layers have their own head size and K/V head count, and proportional
  // RoPE: over the whole head (halves paired), frequency i is rope_theta^(-2i / head) for the first
  // global_rope_fraction * head / 2 of them and 0 (no turn) for the rest. Their values may be their keys'
  // projection (k_eq_v). Every layer's V heads may be RMS-normed without weights (value_norm).
  int global_head_dim = 0;           // head size of layers without a window; 0: head_dim
  int global_kv_heads = 0;           // their K/V heads; 0: num_kv_heads
  float global_rope_fraction = 0.0f;  // proportional RoPE's turning share of global layers; 0: plain RoPE
  bool global_values_are_keys = false;  // global layers have no v projection: V is the k projection
  bool value_norm = false;           // RMSNorm (no weights) of every V head before it is cached
  // Shared K/V: layer l reads the K/V cache of layer_kv_source[l] (an earlier layer of the same kind) and
  // writes none, holding no cache of its own; empty, or l itself: its own cache. Such a layer has no k/v
  // projections; with double_wide_shared its FFN is 2 * hidden_dim wide.
  std::vector<int> layer_kv_source;  // (num_layers) or empty
  bool double_wide_shared = false;
  // Per-layer inputs: a (vocab, num_layers * per_layer_dim) table scaled by sqrt(per_layer_dim) plus a
  // projection of the scaled embedding (times dim^-1/2, RMS-normed per layer), summed and times 2^-1/2, give
  // each row per_layer_dim values per layer; after its FFN a layer adds
  // norm(proj(act(gate x) * those values)). Then every layer's output is times its layer_scalar.
  int per_layer_dim = 0;             // 0: none
  bool layer_scalar = false;
  // Gemma 4's MoE block: a sparse layer keeps its dense MLP too; FFN = norm_1(mlp(pre_ffn_norm x)) +
  // norm_2(experts(pre_norm_2 x)), the router reading rmsnorm(x) * router_scale * dim^-1/2 (x the residual),
  // softmax, top k renormalised, each pick's weight times its expert's scale.
  bool experts_beside_dense = false;

  // Hybrid models: each layer's kind (empty: every layer is attention) and the recurrent kinds' sizes.
  std::vector<LayerKind> layer_kinds;  // (num_layers) or empty
  DeltaNetSizes deltanet;
  bool decay_from_log = false;     // the decay tensor holds A_log (HF; A = -exp(A_log)), else A itself (GGUF)
  int short_conv_kernel = 0;       // LFM2's conv taps (conv_L_cache) over dim channels
  Mamba2Sizes mamba;
  // Nemotron-H: each layer is ONE sublayer, its mixer alone, or (kMlp) its FFN alone; else every layer is
  // a mixer then the FFN.
  bool single_sublayer = false;
  // Granite's multipliers: each sublayer's output is scaled by residual_scale before the residual add, the
  // logits are divided by logit_divisor.
  float residual_scale = 1.0f;
  float logit_divisor = 1.0f;
  bool ffn_bias = false;           // a plain FFN's up and down products have biases (BERT)

  // Mixture of experts (num_experts 0: every FFN is dense). A sparse layer's FFN routes each row by its
  // router's num_experts logits (plus router_bias): kSoftmaxTopk takes the softmax over all of them, then
  // the top experts_per_token (ties: lower expert id), renormalised to sum 1 when norm_topk_prob;
  // kTopkSoftmax takes the top experts_per_token logits and softmaxes over those only. The row's output
  // is the weighted sum of those experts' gated FFNs (with expert_bias, each product's bias added before
  // the weighting), plus a shared expert scaled by sigmoid(shared gate . x) when the family has one.
  int num_experts = 0;
  int experts_per_token = 0;
  int expert_hidden_dim = 0;         // FFN width of one expert
  int shared_expert_hidden_dim = 0;  // width of the shared expert (Qwen2-MoE); 0: none
  bool shared_expert_gate = true;    // the shared expert is scaled by sigmoid(gate . x) (Qwen); false: Granite's
  bool norm_topk_prob = false;
  MoeRouter moe_router = MoeRouter::kSoftmaxTopk;
  bool router_bias = false;          // the router product has a bias (gpt-oss)
  bool expert_bias = false;          // each expert's gate|up and down products have biases (gpt-oss)
  float swiglu_limit = 0.0f;         // Activation::kSwigluClamped's clamp (gpt-oss: 7)
  float swiglu_alpha = 1.0f;         // Activation::kSwigluClamped's sigmoid slope (gpt-oss: 1.702)
  std::vector<uint8_t> layer_sparse;  // (num_layers) 1 where the FFN is the experts; empty when dense

  // Attention extras (gpt-oss). A sink is one learned logit per q head that joins every softmax of that
  // head: it shares the max subtraction and the denominator, and weights no value.
  bool attn_sinks = false;
  bool o_bias = false;               // the output projection has a bias
  // Encoders (BERT; any family may take them). An encoder has no lm_head: a step returns the pooled
  // final hidden states of its sequences, each computed whole in one step (bidirectional attention).
  bool bidirectional = false;      // every row attends to all positions of its sequence (no causal mask)
  bool learned_positions = false;  // absolute learned position embeddings added to the tokens'; no RoPE
  int position_offset = 0;         // row of position 0 in that table (XLM-R: padding_idx + 1 = 2)
  int position_pad_id = -1;        // XLM-R: tokens of this id take row position_offset - 1 and the
                                   // positions after them do not count them; -1: none
  bool token_types = false;        // token type 0's embedding row added to every token (BERT)
  int num_token_types = 2;         // rows of the token type table (config.json type_vocab_size: BERT 2, XLM-R 1)
  bool layer_norm = false;         // LayerNorm (mean removed) with a bias instead of RMSNorm; eps is rms_eps
  bool post_norm = false;          // x = norm(x + sublayer(x)), and the embeddings are normed (embedding_norm)
  bool gated_ffn = true;           // false: down(act(up x + b_up)) + b_down, one up projection with biases
  bool has_lm_head = true;         // false: an encoder, no logits
  // A sequence-classification head (a cross-encoder: BertForSequenceClassification): the pooler's
  // dense + tanh on the [CLS] row (XLM-R: classifier.dense on <s>), then (num_labels, dim) with a bias; a step's pooled output is then
  // these logits. 0: none (the pooled output is the hidden state).
  int num_labels = 0;
  bool score_identity = false;     // a pair's score is the raw logit (sentence-transformers activation_fn
                                   // Identity); else its sigmoid, as vLLM and CrossEncoder give for 1 label

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  // A layer's own attention geometry (Gemma 4's global layers differ; the same for every layer otherwise).
  bool is_global(int layer) const { return window(layer) == 0; }
  int head_dim_of(int layer) const { return global_head_dim > 0 && is_global(layer) ? global_head_dim : head_dim; }
  int kv_heads_of(int layer) const { return global_kv_heads > 0 && is_global(layer) ? global_kv_heads : num_kv_heads; }
  int q_dim_of(int layer) const { return num_heads * head_dim_of(layer); }
  int kv_dim_of(int layer) const { return kv_heads_of(layer) * head_dim_of(layer); }
  int hidden_of(int layer) const { return double_wide_shared && !writes_kv(layer) ? 2 * hidden_dim : hidden_dim; }
  bool values_are_keys(int layer) const { return global_values_are_keys && is_global(layer); }
  int kv_source(int layer) const { return layer_kv_source.empty() ? layer : layer_kv_source[static_cast<size_t>(layer)]; }
  bool writes_kv(int layer) const { return kv_source(layer) == layer; }
  int max_head_dim() const;            // the largest head_dim_of over the layers (activation sizes)
  int max_kv_dim() const;
  int max_hidden() const;
  // The cache: one per attention layer that writes K/V, kv_dim_of(layer) values per slot for K and for V.
  int64_t kv_slot_values() const;       // K (or V) values of one slot over all cached layers
  int64_t kv_values_before(int layer) const;  // of the cached layers before layer's cache (its offset per slot)
  LayerKind layer_kind(int layer) const {
    return layer_kinds.empty() ? LayerKind::kAttention : layer_kinds[static_cast<size_t>(layer)];
  }
  bool is_attention(int layer) const { return layer_kind(layer) == LayerKind::kAttention; }
  bool has_mixer(int layer) const { return layer_kind(layer) != LayerKind::kMlp; }
  bool has_ffn(int layer) const { return !single_sublayer || layer_kind(layer) == LayerKind::kMlp; }
  bool is_recurrent(int layer) const;  // a DeltaNet, short conv or Mamba-2 layer
  LayerState layer_state(int layer) const;  // what a state slot keeps of the layer
  int num_attention_layers() const;    // layers whose K/V the paged cache holds (shared ones not counted)
  int attention_index(int layer) const;  // place among those of the layer whose cache it reads
  bool has_recurrent_layers() const;   // some layer keeps a per-sequence state (a state slot)
  int rotary_dims() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  int q_proj_dim() const { return q_dim() * (attn_output_gate ? 2 : 1); }  // rows of the q projection
  int window(int layer) const { return layer_window.empty() ? 0 : layer_window[static_cast<size_t>(layer)]; }
  bool is_moe() const { return num_experts > 0; }
  bool is_encoder() const { return !has_lm_head; }
  bool is_cross_encoder() const { return num_labels > 0; }
  int pooled_width() const { return num_labels > 0 ? num_labels : dim; }  // values a pooled sequence returns
  bool is_sparse(int layer) const { return !layer_sparse.empty() && layer_sparse[static_cast<size_t>(layer)] != 0; }
  bool has_window() const;             // some layer is windowed
  bool uses_local_rope(int layer) const { return rope_theta_local > 0.0f && window(layer) > 0; }
  bool is_nope(int layer) const { return !layer_nope.empty() && layer_nope[static_cast<size_t>(layer)] != 0; }
  float query_scale() const;           // attn_scale, or 1 / sqrt(head_dim)
  int rotary_dims_of(bool local) const;  // global layers': their head (proportional RoPE) or rotary_dims()
  int64_t num_parameters() const;      // weights incl. embeddings (lm_head counted once when tied)
  int64_t layer_parameters() const;    // the transformer layers' weights only (what a row multiplies by)
  std::string features() const;        // the family description in words, for inspect ("" for plain Llama)
};

// Inverse frequencies of RoPE (rotary_dims() / 2 values) of global layers (rope_theta and its scaling) or of
// local ones (rope_theta_local, unscaled). Longrope has two sets: `long_range` picks the one for positions
// from original_max_position on (a position's rotation never depends on what else is batched). Shared by
// every backend so that rotations agree bit for bit.
void rope_inv_freq(const ModelConfig& config, float* inv_freq, bool local = false, bool long_range = false);
// The factor cos and sin are multiplied by (yarn and longrope attention scaling; 1 otherwise).
float rope_attention_factor(const ModelConfig& config, bool local);

}  // namespace cbatch
