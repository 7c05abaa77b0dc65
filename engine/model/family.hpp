// The model families cbatch runs, one row of data each: which of ModelConfig's family features the
// architecture has and how its files spell them. The loaders (HF config.json, GGUF metadata) read the sizes
// and the per-model values (window, softcaps, RoPE bases), then let the row fill in the rest; the forward
// passes only read ModelConfig. A new Llama-like family is a new row here.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.hpp"

namespace cbatch {

// Which layers a model's sliding_window applies to.
enum class WindowLayers : uint8_t {
  kNone,           // none: the family has no sliding window (Llama)
  kAll,            // every layer (Mistral, Phi-3)
  kFromLayer,      // layers from max_window_layers on, when use_sliding_window (Qwen2, Qwen3)
  kEvenLayers,     // layers 0, 2, 4, ... (Gemma 2)
  kPattern,        // all but every pattern-th layer (Gemma 3: layers 5, 11, ... are global)
};

struct Family {
  std::string_view name;             // ModelConfig::architecture and GGUF general.architecture
  std::vector<std::string_view> hf_model_types;  // config.json model_type values of the family
  bool qkv_bias = false;
  bool qk_norm = false;
  bool sandwich_norms = false;
  bool gemma_norms = false;          // (1 + w) RMSNorm (HF weights) and embeddings scaled by sqrt(dim)
  bool fused_projections = false;    // qkv_proj and gate_up_proj are one tensor each (Phi-3)
  Activation activation = Activation::kSilu;
  RopeLayout gguf_rope_layout = RopeLayout::kHalves;  // llama.cpp permutes q/k only for `llama`
  WindowLayers window_layers = WindowLayers::kNone;
  int gguf_window_pattern = 0;       // kPattern's period where GGUF files do not store it (llama.cpp's value)
  float gguf_rope_theta_local = 0;   // local layers' RoPE base where GGUF files do not store it
  float default_attn_softcap = 0;    // when the file does not name one (Gemma 2: 50, as transformers and llama.cpp)
  float default_final_softcap = 0;   // likewise (Gemma 2: 30)
  int default_max_window_layers = 0;  // Qwen's config default (28)
  bool qk_norm_whole = false;        // the q/k norm spans the whole projection (OLMoE)
  bool tied_by_default = false;      // tie_word_embeddings' default when config.json leaves it out (Gemma, SmolLM3)
  float default_rope_theta = 10000.0f;  // rope_theta's default when config.json leaves it out (SmolLM3: 2e6)
  // NoPE layers (SmolLM3): layer i keeps q and k unrotated when (i + 1) % nope_interval == 0, config.json's
  // no_rope_layer_interval default and llama.cpp's hard-coded step (GGUF stores neither it nor the list);
  // config.json's no_rope_layers (1 = RoPE, 0 = NoPE) wins. 0: the family has no NoPE layers.
  int nope_interval = 0;
  // Qwen3.5: zero-centred norms ((1 + w) RMSNorm in HF files, stored as 1 + w in GGUF, without Gemma's
  // embedding scale), the attention output gate, partial rotary (default_rotary_factor of head_dim when the
  // config names none), and gated DeltaNet layers beside the attention ones (hybrid_layers).
  bool zero_centred_norms = false;
  bool attn_output_gate = false;
  float default_rotary_factor = 0.0f;  // 0: full rotary, and a partial_rotary_factor other than 1 is refused
  // The kind of the family's recurrent layers beside its attention ones (kAttention: none): gated DeltaNet
  // (Qwen3.5, Qwen3-Next), short conv (LFM2), Mamba-2 (Granite 4.0-H, Nemotron-H).
  LayerKind recurrent_kind = LayerKind::kAttention;
  bool gguf_tiled_value_heads = false;  // llama.cpp's converter tiles the DeltaNet's value heads (Qwen3.5)
  // Qwen3-Next: the DeltaNet's in_proj_qkvz and in_proj_ba grouped by key head (GGUF: ssm_ba grouped, q|k|v
  // and z split by the converter).
  bool deltanet_grouped_projections = false;
  // Hugging Face files stack a layer's experts in mlp.experts.gate_up_proj and down_proj (E, out, in), gate
  // rows then up rows, as transformers 5 fuses them (Qwen3.5-MoE); gpt-oss's stacked experts are (E, in,
  // out) with gate and up interleaved (hf_stacked_experts.hpp).
  bool hf_experts_out_in = false;
  // Mixture of experts. GGUF stores no routing rule, so the row holds it: gguf_norm_topk_prob is what
  // llama.cpp applies; HF configs name norm_topk_prob (transformers' default false) unless the family
  // always renormalises (Mixtral: reads_norm_topk_prob false, gguf_norm_topk_prob true).
  bool moe = false;
  bool shared_expert = false;        // a shared expert with a sigmoid gate (Qwen2-MoE)
  bool gguf_norm_topk_prob = false;
  bool reads_norm_topk_prob = true;
  MoeRouter moe_router = MoeRouter::kSoftmaxTopk;
  bool router_bias = false;
  bool expert_bias = false;
  // gpt-oss's extras: attention sinks and output bias; its clamped SwiGLU's values where a file names none
  // (GGUF keeps neither: llama.cpp hard-codes them); and its YaRN without truncation (GGUF has no key: the
  // model's definition, transformers' truncate: false; llama.cpp's ggml always rounds the range out).
  bool attn_sinks = false;
  bool o_bias = false;
  float swiglu_limit = 0.0f;
  float swiglu_alpha = 1.0f;
  bool gguf_yarn_truncate = true;
  // An encoder (BERT): bidirectional, learned absolute positions, token types, post-norm LayerNorm with
  // biases, plain GELU FFN with biases, biased attention projections, no lm_head.
  bool bert_encoder = false;
  // XLM-RoBERTa's differences from BERT (transformers' XLMRobertaModel): positions start at pad_token_id + 1
  // and pad tokens neither count nor move (create_position_ids_from_input_ids); under a task head the base
  // model's tensors are under "roberta." and the sequence-classification head is classifier.dense (tanh)
  // then classifier.out_proj, the same arithmetic as BERT's pooler then classifier.
  bool padded_positions = false;
  std::string_view hf_base_prefix = "bert.";
  bool roberta_classifier = false;
  // Gemma 4 (hf_gemma4_config.hpp, gguf_gemma4_keys.hpp): global layers with their own head size, K/V heads
  // and proportional RoPE, values that may be the keys, V norm, shared K/V, per-layer inputs and layer
  // scalars; its norms scale by w itself (no 1 + w, in both formats) and queries are not pre-scaled.
  bool gemma4_layers = false;
  // Granite 4.0-H: the embedding, residual, attention and logits multipliers, attention without positions
  // where position_embedding_type is "nope" (GGUF: rope.scaling.finetuned false), a shared MLP beside the
  // experts (no gate), or alone.
  bool granite_multipliers = false;
  // Nemotron-H: hybrid_override_pattern, each layer one sublayer (a mixer, or a relu^2 MLP alone),
  // attention without positions.
  bool nemotron_layers = false;
};

// The row of an architecture name (ModelConfig::architecture, GGUF general.architecture) or HF
// model_type; nullptr when unknown.
const Family* find_family(std::string_view name);
// The row of a GGUF file's general.architecture: `llama` files with experts are Mixtral.
const Family* find_gguf_family(std::string_view arch, bool has_experts);
const Family* find_hf_family(std::string_view model_type);
// The names, for error messages: "llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3".
std::string supported_families();
// "architecture 'mixtral' is not supported (mixture-of-experts models are not supported yet); supported: ...".
std::string unsupported_family_message(std::string_view name);

bool has_recurrent_kind(const Family& family);  // the family has recurrent layers beside attention

// Sets the row's boolean features on config (norm_offset is the loader's: it depends on the format).
void apply_family(const Family& family, ModelConfig& config);
// (num_layers) window of each layer for the family's pattern; all 0 when window <= 0.
std::vector<int> family_layer_windows(const Family& family, int num_layers, int window, int pattern,
                                      int first_windowed_layer);
// (num_layers) 1 for every interval-th layer ((i + 1) % interval == 0): the NoPE layers of the interval rule.
std::vector<uint8_t> nope_layers_every(int num_layers, int interval);

}  // namespace cbatch
