// The family table. Sources: each family's Hugging Face modeling code and config defaults, and the
// conventions of llama.cpp's GGUF converter (which architectures get permuted q/k, Gemma's stored 1 + w).
#include "engine/model/family.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace cbatch {
namespace {

const std::vector<Family>& families() {
  static const std::vector<Family> table = [] {
    std::vector<Family> t;
    Family llama{.name = "llama", .hf_model_types = {"llama"}};
    llama.gguf_rope_layout = RopeLayout::kAdjacentPairs;
    t.push_back(llama);
    Family mistral = llama;
    mistral.name = "mistral";
    mistral.hf_model_types = {"mistral"};
    mistral.window_layers = WindowLayers::kAll;
    t.push_back(mistral);
    t.push_back({.name = "qwen2", .hf_model_types = {"qwen2"}, .qkv_bias = true,
                 .window_layers = WindowLayers::kFromLayer, .default_max_window_layers = 28});
    t.push_back({.name = "qwen3", .hf_model_types = {"qwen3"}, .qk_norm = true,
                 .window_layers = WindowLayers::kFromLayer, .default_max_window_layers = 28});
    t.push_back({.name = "gemma2", .hf_model_types = {"gemma2"}, .sandwich_norms = true, .gemma_norms = true,
                 .activation = Activation::kGeluTanh, .window_layers = WindowLayers::kEvenLayers,
                 .default_attn_softcap = 50.0f, .default_final_softcap = 30.0f, .tied_by_default = true});
    t.push_back({.name = "gemma3", .hf_model_types = {"gemma3_text", "gemma3"}, .qk_norm = true,
                 .sandwich_norms = true, .gemma_norms = true, .activation = Activation::kGeluTanh,
                 .window_layers = WindowLayers::kPattern, .gguf_window_pattern = 6,
                 .gguf_rope_theta_local = 10000.0f, .tied_by_default = true});
    t.push_back({.name = "phi3", .hf_model_types = {"phi3"}, .fused_projections = true,
                 .window_layers = WindowLayers::kAll});
    // Mixtures of experts (softmax, then the top k; transformers' modeling code and llama.cpp's build_moe_ffn).
    Family mixtral = mistral;
    mixtral.name = "mixtral";
    mixtral.hf_model_types = {"mixtral"};
    mixtral.moe = true;
    mixtral.gguf_norm_topk_prob = true;
    mixtral.reads_norm_topk_prob = false;
    t.push_back(mixtral);
    t.push_back({.name = "qwen2moe", .hf_model_types = {"qwen2_moe"}, .qkv_bias = true,
                 .window_layers = WindowLayers::kFromLayer, .default_max_window_layers = 28, .moe = true,
                 .shared_expert = true});
    t.push_back({.name = "qwen3moe", .hf_model_types = {"qwen3_moe"}, .qk_norm = true,
                 .window_layers = WindowLayers::kFromLayer, .default_max_window_layers = 28, .moe = true,
                 .gguf_norm_topk_prob = true});
    t.push_back({.name = "olmoe", .hf_model_types = {"olmoe"}, .qk_norm = true, .qk_norm_whole = true, .moe = true});
    // gpt-oss: biased q/k/v/o, sinks, even layers windowed (HF layer_types; llama.cpp's swa pattern 2),
    // top-k of the biased router logits then a softmax over those k, biased experts, clamped SwiGLU.
    Family gpt_oss{.name = "gpt-oss", .hf_model_types = {"gpt_oss"}, .qkv_bias = true,
                   .activation = Activation::kSwigluClamped, .window_layers = WindowLayers::kEvenLayers,
                   .moe = true};
    gpt_oss.moe_router = MoeRouter::kTopkSoftmax;
    gpt_oss.router_bias = gpt_oss.expert_bias = gpt_oss.attn_sinks = gpt_oss.o_bias = true;
    gpt_oss.swiglu_limit = 7.0f;
    gpt_oss.swiglu_alpha = 1.702f;
    gpt_oss.gguf_yarn_truncate = false;
      t.push_back(gpt_oss);
    // Qwen3.5 (dense): gated DeltaNet layers beside gated attention, zero-centred norms, partial rotary.
    Family qwen35{.name = "qwen35", .hf_model_types = {"qwen3_5", "qwen3_5_text"}, .qk_norm = true};
    qwen35.zero_centred_norms = qwen35.attn_output_gate = true;
    qwen35.recurrent_kind = LayerKind::kDeltaNet;
    qwen35.default_rotary_factor = 0.25f;
    qwen35.gguf_tiled_value_heads = true;
    t.push_back(qwen35);
    // Qwen3.5-MoE: Qwen3.5 with every FFN a mixture of experts (top k always renormalised) and a shared
    // expert with its sigmoid gate; Hugging Face files stack the experts as transformers 5 does.
    Family qwen35moe = qwen35;
    qwen35moe.name = "qwen35moe";
    qwen35moe.hf_model_types = {"qwen3_5_moe", "qwen3_5_moe_text"};
    qwen35moe.moe = qwen35moe.shared_expert = qwen35moe.gguf_norm_topk_prob = qwen35moe.hf_experts_out_in = true;
    qwen35moe.reads_norm_topk_prob = false;
    t.push_back(qwen35moe);
    // Qwen3-Next: Qwen3.5-MoE's layers with Qwen2-MoE's sparse-layer rule and norm_topk_prob, per-expert
    // tensors, and the DeltaNet's projections fused and grouped by key head.
    Family qwen3next = qwen35moe;
    qwen3next.name = "qwen3next";
    qwen3next.hf_model_types = {"qwen3_next"};
    qwen3next.reads_norm_topk_prob = qwen3next.deltanet_grouped_projections = true;
    qwen3next.hf_experts_out_in = qwen3next.gguf_tiled_value_heads = false;
    t.push_back(qwen3next);
    t.push_back({.name = "bert", .hf_model_types = {"bert"}, .qkv_bias = true, .activation = Activation::kGeluErf,
                 .bert_encoder = true});
    Family xlm_roberta = t.back();
    xlm_roberta.name = "xlm-roberta";
    xlm_roberta.hf_model_types = {"xlm-roberta"};
    xlm_roberta.padded_positions = xlm_roberta.roberta_classifier = true;
    xlm_roberta.hf_base_prefix = "roberta.";
    t.push_back(xlm_roberta);
    // SmolLM3: Llama with every fourth layer unrotated (NoPE); llama.cpp's converter permutes its q/k as Llama's.
    Family smollm3 = llama;
    smollm3.name = "smollm3";
    smollm3.hf_model_types = {"smollm3"};
    smollm3.tied_by_default = true;
    smollm3.default_rope_theta = 2000000.0f;
    smollm3.nope_interval = 4;
    t.push_back(smollm3);
    // Gemma 4 (text): Gemma 3's layers (GeGLU, q/k norms, sandwich norms, embedding scale, sliding and
    // global layers by layer_types, 5:1 by default) with the gemma4_layers features.
    Family gemma4 = *std::find_if(t.begin(), t.end(), [](const Family& f) { return f.name == "gemma3"; });
    gemma4.name = "gemma4";
    gemma4.hf_model_types = {"gemma4", "gemma4_text"};
    gemma4.gguf_window_pattern = 0;
    gemma4.gguf_rope_theta_local = 0.0f;
    gemma4.gemma4_layers = true;
    gemma4.hf_experts_out_in = true;  // 26B-A4B: layers.N.experts.gate_up_proj (E, 2 width, dim), down_proj
    t.push_back(gemma4);
    // LFM2: short-conv layers beside GQA attention with q/k norms; tied embeddings.
    Family lfm2{.name = "lfm2", .hf_model_types = {"lfm2"}, .qk_norm = true, .tied_by_default = true,
                .default_rope_theta = 1000000.0f};
    lfm2.recurrent_kind = LayerKind::kShortConv;
    t.push_back(lfm2);
    // Granite 4.0-H (dense or with experts and a shared MLP) and Nemotron-H: Mamba-2 layers beside attention.
    Family granite{.name = "granitehybrid", .hf_model_types = {"granitemoehybrid"}};
    granite.recurrent_kind = LayerKind::kMamba2;
    granite.gguf_rope_layout = RopeLayout::kAdjacentPairs;  // the converter permutes q/k as LlamaModel's
    granite.granite_multipliers = granite.gguf_norm_topk_prob = granite.hf_experts_out_in = true;
    granite.reads_norm_topk_prob = false;
    t.push_back(granite);
    Family nemotron_h{.name = "nemotron_h", .hf_model_types = {"nemotron_h"}, .activation = Activation::kRelu2};
    nemotron_h.recurrent_kind = LayerKind::kMamba2;
    nemotron_h.gguf_rope_layout = RopeLayout::kAdjacentPairs;
    nemotron_h.nemotron_layers = true;
    t.push_back(nemotron_h);
    return t;
  }();
  return table;
}

// Architectures people ask for that are not Llama-like dense decoders.
constexpr std::array<std::string_view, 4> kMixtureOfExperts = {"deepseek_v2", "deepseek_v3", "deepseek2", "phimoe"};

}  // namespace

const Family* find_family(std::string_view name) {
  for (const Family& f : families()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const Family* find_gguf_family(std::string_view arch, bool has_experts) {
  return find_family(arch == "llama" && has_experts ? "mixtral" : arch);
}

const Family* find_hf_family(std::string_view model_type) {
  for (const Family& f : families()) {
    for (std::string_view t : f.hf_model_types) {
      if (t == model_type) return &f;
    }
  }
  return nullptr;
}

std::string supported_families() {
  std::string out;
  for (const Family& f : families()) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

std::string unsupported_family_message(std::string_view name) {
  bool moe = false;
  for (std::string_view m : kMixtureOfExperts) moe = moe || m == name;
  return "architecture '" + std::string(name) + "' is not supported" +
         (moe ? " (this mixture-of-experts family is not supported yet)" : "") + "; supported: " + supported_families();
}

bool has_recurrent_kind(const Family& family) { return family.recurrent_kind != LayerKind::kAttention; }

void apply_family(const Family& family, ModelConfig& config) {
  config.architecture = std::string(family.name);
  config.qkv_bias = family.qkv_bias;
  config.qk_norm = family.qk_norm;
  config.qk_norm_whole = family.qk_norm_whole;
  config.sandwich_norms = family.sandwich_norms;
  config.activation = family.activation;
  config.moe_router = family.moe_router;
  config.router_bias = family.router_bias;
  config.expert_bias = family.expert_bias;
  config.attn_sinks = family.attn_sinks;
  config.o_bias = family.o_bias;
  config.swiglu_limit = family.swiglu_limit;
  config.swiglu_alpha = family.swiglu_alpha;
  config.attn_output_gate = family.attn_output_gate;
  config.single_sublayer = family.nemotron_layers;
  if (family.nemotron_layers) config.gated_ffn = false;
  if (family.gemma_norms) config.embedding_scale = std::sqrt(static_cast<float>(config.dim));
  if (family.bert_encoder) {
    config.bidirectional = config.learned_positions = config.token_types = true;
    config.layer_norm = config.post_norm = config.o_bias = true;
    config.gated_ffn = config.has_lm_head = false;
    config.ffn_bias = true;
  }
}

std::vector<int> family_layer_windows(const Family& family, int num_layers, int window, int pattern,
                                      int first_windowed_layer) {
  // A layer count past check_model_config's bound (4,096) gets no windows: that check reports the file,
  // rather than this vector of an absurd size (a fuzzed file asked for 3 GB).
  if (num_layers > (1 << 12)) return {};
  std::vector<int> windows(static_cast<size_t>(std::max(num_layers, 0)), 0);
  if (window <= 0) return windows;
  for (int i = 0; i < num_layers; ++i) {
    bool windowed = false;
    switch (family.window_layers) {
      case WindowLayers::kNone: break;
      case WindowLayers::kAll: windowed = true; break;
      case WindowLayers::kFromLayer: windowed = i >= first_windowed_layer; break;
      case WindowLayers::kEvenLayers: windowed = i % 2 == 0; break;
      case WindowLayers::kPattern: windowed = pattern <= 0 || (i + 1) % pattern != 0; break;
    }
    windows[static_cast<size_t>(i)] = windowed ? window : 0;
  }
  return windows;
}

std::vector<uint8_t> nope_layers_every(int num_layers, int interval) {
  if (num_layers > (1 << 12) || interval <= 0) return {};  // as family_layer_windows: the config check reports it
  std::vector<uint8_t> nope(static_cast<size_t>(std::max(num_layers, 0)), 0);
  for (int i = 0; i < num_layers; ++i) nope[static_cast<size_t>(i)] = (i + 1) % interval == 0;
  return nope;
}

}  // namespace cbatch
