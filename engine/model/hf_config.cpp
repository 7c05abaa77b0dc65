// Parsing of Hugging Face config.json with simdjson's DOM: the sizes (LlamaConfig names and defaults),
// then the family's own fields (model_type picks the row of family.hpp): query_pre_attn_scalar,
// softcapping, sliding_window with the family's layer pattern or an explicit layer_types list,
// rope_local_base_freq, rope_scaling (llama3, linear, yarn with truncate, longrope; Gemma 4's proportional),
// the experts' counts and routing, gpt-oss's swiglu_limit and swiglu_alpha, SmolLM3's NoPE layers, Gemma 4's
// own (hf_gemma4_config.hpp). Multimodal Gemma 3 and 4 configs keep the text model in text_config.
// Required: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size. A JSON null
// counts as absent.
#include "engine/model/hf_config.hpp"

#include <cmath>
#include <optional>

#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"
#include "engine/model/family.hpp"
#include "engine/model/hf_gemma4_config.hpp"
#include "engine/model/hf_hybrid_config.hpp"
#include "engine/model/model_checks.hpp"

namespace cbatch {
namespace {

std::vector<float> read_floats(const JsonFields& f, const char* key, int count) {
  std::vector<float> out;
  for (simdjson::dom::element e : f.array(key)) {
    double v = 0;
    if (e.get_double().get(v) != simdjson::SUCCESS) {
      int64_t i = 0;
      if (e.get_int64().get(i) != simdjson::SUCCESS) f.fail(key, "must be a list of numbers");
      v = static_cast<double>(i);
    }
    if (!(v > 0)) f.fail(key, "must hold positive numbers");
    out.push_back(static_cast<float>(v));
  }
  if (static_cast<int>(out.size()) != count) {
    f.fail(key, "has " + std::to_string(out.size()) + " values, expected head_dim / 2 = " + std::to_string(count));
  }
  return out;
}

// The RoPE parameters of global layers: transformers 5's rope_parameters (flat, or per layer type with
// full_attention / sliding_attention), else transformers 4's rope_scaling; null when neither.
std::optional<JsonFields> rope_object(const JsonFields& f, const char* layer_type) {
  if (f.has("rope_parameters")) {
    const JsonFields p = f.object("rope_parameters");
    if (p.has("full_attention") || p.has("sliding_attention")) {
      if (!p.has(layer_type)) return std::nullopt;
      return p.object(layer_type);
    }
    return p;
  }
  if (f.has("rope_scaling") && std::string(layer_type) == "full_attention") return f.object("rope_scaling");
  return std::nullopt;
}

double rope_theta_of(const JsonFields& f, const char* layer_type, double fallback) {
  const std::optional<JsonFields> r = rope_object(f, layer_type);
  if (r && r->has("rope_theta")) return r->get_number("rope_theta", fallback);
  return fallback;
}

RopeScaling read_rope_scaling(const JsonFields& fields, const ModelConfig& c) {
  RopeScaling s;
  const std::optional<JsonFields> object = rope_object(fields, "full_attention");
  if (!object) return s;
  const JsonFields& r = *object;
  const std::string type = r.get_string("rope_type", r.get_string("type", "default"));
  s.original_max_position = r.get_size("original_max_position_embeddings",
                                       fields.get_size("original_max_position_embeddings", 8192));
  if (type == "default") return s;
  s.factor = static_cast<float>(r.get_number("factor", 1.0));
  if (type == "proportional") {  // Gemma 4: the turning share is the family's (hf_gemma4_config.cpp)
    s.type = s.factor == 1.0f ? RopeScalingType::kNone : RopeScalingType::kLinear;
  } else if (type == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    s.type = RopeScalingType::kLlama3;
    s.factor = static_cast<float>(r.get_number("factor", 8.0));
    s.low_freq_factor = static_cast<float>(r.get_number("low_freq_factor", 1.0));
    s.high_freq_factor = static_cast<float>(r.get_number("high_freq_factor", 4.0));
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0.0f)) {
      r.fail("low_freq_factor", "and high_freq_factor are invalid (need 0 < low < high)");
    }
  } else if (type == "yarn") {
    s.type = RopeScalingType::kYarn;
    s.beta_fast = static_cast<float>(r.get_number("beta_fast", 32.0));
    s.beta_slow = static_cast<float>(r.get_number("beta_slow", 1.0));
    s.truncate = r.get_bool("truncate", true);
    const double mscale = s.factor > 1.0f ? 0.1 * std::log(s.factor) + 1.0 : 1.0;
    s.attention_factor = static_cast<float>(r.get_number("attention_factor", mscale));
  } else if (type == "longrope") {
    s.type = RopeScalingType::kLongrope;
    s.short_factor = read_floats(r, "short_factor", c.head_dim / 2);
    s.long_factor = read_floats(r, "long_factor", c.head_dim / 2);
    const double factor = static_cast<double>(c.max_context) / s.original_max_position;
    const double attention = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(s.original_max_position));
    s.attention_factor = static_cast<float>(r.get_number("attention_factor", attention));
    return s;
  } else {
    r.fail("rope_type", "'" + type + "' is not supported (supported: default, linear, llama3, yarn, longrope)");
  }
  if (!(s.factor >= 1.0f)) r.fail("factor", "must be at least 1");
  return s;
}

Activation read_activation(const JsonFields& f, const Family& family) {
  if (family.activation == Activation::kSwigluClamped) return family.activation;  // hidden_act names its silu
  if (family.activation == Activation::kRelu2) {  // Nemotron-H: hidden_act is its Mamba's, mlp_hidden_act the MLP's
    const std::string act = f.get_string("mlp_hidden_act", "relu2");
    if (act != "relu2") f.fail("mlp_hidden_act", "'" + act + "' is not supported (only relu2)");
    return family.activation;
  }
  const char* key = f.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string fallback = family.activation == Activation::kSilu     ? "silu"
                               : family.activation == Activation::kGeluErf ? "gelu"
                                                                           : "gelu_pytorch_tanh";
  const std::string act = f.get_string(key, fallback);
  if (act == "silu" || act == "swish") return Activation::kSilu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu_new") return Activation::kGeluTanh;
  if (act == "gelu") return Activation::kGeluErf;
  f.fail(key, "'" + act + "' is not supported (supported: silu, gelu_pytorch_tanh, gelu)");
}

// Per-layer windows: an explicit layer_types list wins over the family's pattern.
std::vector<int> read_layer_windows(const JsonFields& f, const Family& family, const ModelConfig& c) {
  const int window = f.has("sliding_window") ? f.get_size("sliding_window") : 0;
  if (family.window_layers == WindowLayers::kNone || window == 0) return {};
  if (family.window_layers == WindowLayers::kFromLayer && !f.get_bool("use_sliding_window", false)) return {};
  if (f.has("layer_types")) {
    std::vector<int> windows;
    for (simdjson::dom::element e : f.array("layer_types")) {
      std::string_view type;
      if (e.get_string().get(type) != simdjson::SUCCESS) f.fail("layer_types", "must be a list of strings");
      if (type != "sliding_attention" && type != "full_attention") {
        f.fail("layer_types", "holds '" + std::string(type) + "' (supported: sliding_attention, full_attention)");
      }
      windows.push_back(type == "sliding_attention" ? window : 0);
    }
    if (static_cast<int>(windows.size()) != c.num_layers) f.fail("layer_types", "must have one entry per layer");
    return windows;
  }
  return family_layer_windows(family, c.num_layers, window, f.get_size("sliding_window_pattern", 6),
                              static_cast<int>(f.get_number("max_window_layers", family.default_max_window_layers)));
}

// The experts: counts, widths, which layers are sparse (Qwen's decoder_sparse_step and mlp_only_layers:
// layer l is sparse unless listed, when (l + 1) % step == 0) and the routing rule.
void read_moe_fields(const JsonFields& f, const Family& family, ModelConfig& c) {
  const char* count_key = f.has("num_local_experts") ? "num_local_experts" : "num_experts";
  c.num_experts = f.get_size(count_key);
  if (c.num_experts > kMaxExperts) f.fail(count_key, "= " + std::to_string(c.num_experts) + " is above " + std::to_string(kMaxExperts));
  const char* top_k_key = f.has("num_experts_per_tok") || !f.has("experts_per_token") ? "num_experts_per_tok"
                                                                                      : "experts_per_token";
  const int64_t top_k = f.get_int(top_k_key);
  if (top_k < 1 || top_k > c.num_experts) {
    f.fail(top_k_key, "= " + std::to_string(top_k) + " must be between 1 and the number of experts (" +
                                      std::to_string(c.num_experts) + ")");
  }
  c.experts_per_token = static_cast<int>(top_k);
  c.expert_hidden_dim = f.has("moe_intermediate_size") ? f.get_size("moe_intermediate_size") : c.hidden_dim;
  if (family.shared_expert) c.shared_expert_hidden_dim = f.get_size("shared_expert_intermediate_size");
  c.norm_topk_prob = family.reads_norm_topk_prob ? f.get_bool("norm_topk_prob", false) : family.gguf_norm_topk_prob;
  const int step = f.get_size("decoder_sparse_step", 1);
  c.layer_sparse.assign(static_cast<size_t>(c.num_layers), 0);
  for (int l = 0; l < c.num_layers; ++l) c.layer_sparse[static_cast<size_t>(l)] = (l + 1) % step == 0;
  if (f.has("mlp_only_layers")) {
    for (simdjson::dom::element e : f.array("mlp_only_layers")) {
      int64_t l = -1;
      if (e.get_int64().get(l) != simdjson::SUCCESS || l < 0 || l >= c.num_layers) {
        f.fail("mlp_only_layers", "must list layer indices below num_hidden_layers (" + std::to_string(c.num_layers) + ")");
      }
      c.layer_sparse[static_cast<size_t>(l)] = 0;
    }
  }
  if (f.has("clip_qkv")) f.fail("clip_qkv", "is not supported (only null)");
}

// SmolLM3's NoPE layers: no_rope_layers (one 0 or 1 per layer, 1 = RoPE), else every
// no_rope_layer_interval-th layer. Its windows (use_sliding_window on the NoPE layers) are not supported.
std::vector<uint8_t> read_nope_layers(const JsonFields& f, const Family& family, const ModelConfig& c) {
  if (f.get_bool("use_sliding_window", false) && f.has("sliding_window")) {
    f.fail("use_sliding_window", "is not supported for " + std::string(family.name) + " (windows on its NoPE layers)");
  }
  if (!f.has("no_rope_layers")) {
    const int interval = f.get_size("no_rope_layer_interval", family.nope_interval);
    return nope_layers_every(c.num_layers, interval);
  }
  std::vector<uint8_t> nope;
  for (simdjson::dom::element e : f.array("no_rope_layers")) {
    int64_t v = -1;
    if (e.get_int64().get(v) != simdjson::SUCCESS || (v != 0 && v != 1)) {
      f.fail("no_rope_layers", "must hold 0 (NoPE) or 1 (RoPE) per layer");
    }
    nope.push_back(v == 0);
  }
  if (static_cast<int>(nope.size()) != c.num_layers) {
    f.fail("no_rope_layers", "has " + std::to_string(nope.size()) + " entries, expected one per layer (" +
                                 std::to_string(c.num_layers) + ")");
  }
  return nope;
}

// BERT's LayerNorm epsilon and position embeddings (absolute only); token type 0 is the only one used.
// XLM-R's table starts at pad_token_id + 1 (transformers' padding_idx), so the model's context is that
// many rows short of max_position_embeddings (514 -> 512).
void read_encoder_fields(const JsonFields& f, const Family& family, ModelConfig& c) {
  c.rms_eps = static_cast<float>(f.get_number("layer_norm_eps", 1e-12));
  if (family.padded_positions) {
    const int64_t pad = f.has("pad_token_id") ? f.get_int("pad_token_id") : 1;
    if (pad < 0 || pad >= c.vocab_size) f.fail("pad_token_id", "= " + std::to_string(pad) + " is outside the vocabulary");
    c.position_pad_id = static_cast<int>(pad);
    c.position_offset = c.position_pad_id + 1;
    if (c.max_context <= c.position_offset) {
      f.fail("max_position_embeddings", "= " + std::to_string(c.max_context) + " leaves no positions after pad_token_id + 1 = " +
                                            std::to_string(c.position_offset));
    }
    c.max_context -= c.position_offset;
  }
  const std::string positions = f.get_string("position_embedding_type", "absolute");
  if (positions != "absolute") f.fail("position_embedding_type", "'" + positions + "' is not supported (only absolute)");
  c.num_token_types = f.get_size("type_vocab_size", 2);  // get_size refuses 0 and below
  if (f.get_bool("is_decoder", false)) f.fail("is_decoder", "is not supported (BERT runs as an encoder)");
}

// A sequence-classification checkpoint (architectures: *ForSequenceClassification, a cross-encoder): its
// label count (num_labels, else the size of id2label, else 2 as transformers defaults) and the activation
// its pairs' scores take (sentence_transformers.activation_fn or sbert_ce_default_activation_function:
// Identity keeps the logit; Sigmoid, or none, gives the sigmoid, as vLLM does).
void read_classifier_fields(const JsonFields& f, ModelConfig& c) {
  bool classifies = false;
  if (f.has("architectures")) {
    for (simdjson::dom::element a : f.array("architectures")) {
      std::string_view name;
      const bool named = a.get_string().get(name) == simdjson::SUCCESS;
      if (named && name.ends_with("ForSequenceClassification")) classifies = true;
    }
  }
  if (!classifies) return;
  size_t labels = 2;
  if (f.has("id2label")) labels = f.members("id2label").size();
  c.num_labels = f.has("num_labels") ? f.get_size("num_labels") : static_cast<int>(labels);
  std::string activation = f.get_string("sbert_ce_default_activation_function", "");
  if (f.has("sentence_transformers")) {
    activation = f.object("sentence_transformers").get_string("activation_fn", activation);
  }
  if (!activation.empty() && !activation.ends_with(".Identity") && !activation.ends_with(".Sigmoid")) {
    f.fail("sentence_transformers.activation_fn", "'" + activation + "' is not supported (Identity or Sigmoid)");
  }
  c.score_identity = activation.ends_with(".Identity");
}

void read_family_fields(const JsonFields& f, const Family& family, ModelConfig& c) {
  apply_family(family, c);
  c.activation = read_activation(f, family);
  if (c.activation == Activation::kSwigluClamped) {
    c.swiglu_limit = static_cast<float>(f.get_number("swiglu_limit", family.swiglu_limit));
    c.swiglu_alpha = static_cast<float>(f.get_number("swiglu_alpha", family.swiglu_alpha));
    if (!(c.swiglu_limit > 0.0f) || !std::isfinite(c.swiglu_limit)) f.fail("swiglu_limit", "must be positive");
    if (!std::isfinite(c.swiglu_alpha)) f.fail("swiglu_alpha", "must be a number");
  }
  if (family.gemma_norms) {
    c.norm_offset = 1.0f;  // Gemma's RMSNorm scales by (1 + w)
    if (f.has("query_pre_attn_scalar")) {
      c.attn_scale = static_cast<float>(1.0 / std::sqrt(f.get_number("query_pre_attn_scalar", c.head_dim)));
    }
    // Absent: the family's default (Gemma 2: 50 and 30); null: none.
    auto cap = [&](const char* key, float fallback) {
      return f.is_null(key) ? 0.0f : static_cast<float>(f.get_number(key, fallback));
    };
    c.attn_softcap = cap("attn_logit_softcapping", family.default_attn_softcap);
    c.final_softcap = cap("final_logit_softcapping", family.default_final_softcap);
  }
  if (family.window_layers == WindowLayers::kPattern) {
    c.rope_theta_local = static_cast<float>(
        rope_theta_of(f, "sliding_attention", f.get_number("rope_local_base_freq", 10000.0)));
  }
  c.layer_window = read_layer_windows(f, family, c);
  if (family.nope_interval > 0) c.layer_nope = read_nope_layers(f, family, c);
  if (family.moe) read_moe_fields(f, family, c);
  if (family.bert_encoder) read_encoder_fields(f, family, c);
  if (family.bert_encoder) read_classifier_fields(f, c);
  if (family.zero_centred_norms) c.norm_offset = 1.0f;  // Qwen3.5's RMSNorm scales by (1 + w)
  if (!family.gemma4_layers) read_rotary_dim(f, family, c);
}

ModelConfig read_model_config(const JsonFields& f, const Family& family, const std::string& path,
                              std::vector<std::string>& notes) {
  ModelConfig c;
  c.dim = f.get_size("hidden_size");
  // A model whose every FFN is experts may name only their width (Qwen3.5-MoE).
  const bool experts_only = family.moe && !f.has("intermediate_size") && f.has("moe_intermediate_size");
  c.hidden_dim = f.get_size(experts_only ? "moe_intermediate_size" : "intermediate_size");
  c.num_layers = f.get_size("num_hidden_layers");
  c.num_heads = f.get_size("num_attention_heads");
  c.num_kv_heads = f.get_size("num_key_value_heads", c.num_heads);
  c.head_dim = f.get_size("head_dim", c.dim / c.num_heads);
  c.vocab_size = f.get_size("vocab_size");
  c.max_context = f.get_size("max_position_embeddings", 2048);
  c.rms_eps = static_cast<float>(f.get_number("rms_norm_eps", 1e-6));
  const double theta = f.get_number("rope_theta", family.default_rope_theta);
  c.rope_theta = static_cast<float>(rope_theta_of(f, "full_attention", theta));
  c.rope_layout = RopeLayout::kHalves;
  c.tied_embeddings = f.get_bool("tie_word_embeddings", family.tied_by_default);
  check_model_config(c, path);
  c.rope_scaling = read_rope_scaling(f, c);
  read_family_fields(f, family, c);
  read_hybrid_fields(f, family, c, notes);
  if (family.gemma4_layers) read_gemma4_fields(f, c, notes);
  check_model_config(c, path);
  return c;
}

}  // namespace

HfConfig read_hf_config(const std::string& path) {
  const JsonFile file(path);
  const JsonFields top = file.fields();
  const std::string model_type = top.get_string("model_type", "llama");
  const Family* family = find_hf_family(model_type);
  if (family == nullptr) throw Error("'" + path + "': model_type: " + unsupported_family_message(model_type));
  // A multimodal Gemma 3 config holds the text model's fields in text_config.
  const JsonFields fields = top.has("text_config") ? top.object("text_config") : top;
  HfConfig hf;
  hf.config = read_model_config(fields, *family, path, hf.notes);
  if (top.has("vision_config")) hf.notes.push_back("the vision tower (vision_config) is skipped: cbatch runs the text model");
  if (top.has("audio_config")) hf.notes.push_back("the audio tower (audio_config) is skipped: cbatch runs the text model");
  const JsonFields& ids = top.has("bos_token_id") || !top.has("text_config") ? top : fields;
  const std::vector<int32_t> bos = ids.get_ids("bos_token_id");
  if (bos.size() > 1) ids.fail("bos_token_id", "must be a single token id");
  hf.bos_id = bos.empty() ? -1 : bos[0];
  hf.eos_ids = ids.get_ids("eos_token_id");
  hf.torch_dtype = top.get_string("torch_dtype", fields.get_string("torch_dtype", ""));
  return hf;
}

}  // namespace cbatch
