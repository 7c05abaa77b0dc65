// A GGUF file as a Model: the config from the `{arch}.` keys and the family row (family.hpp), tensor
// views straight into the mapping (Model::storage keeps it alive), the tokenizer from tokenizer.ggml.*.
// The tensors are the table's GGUF column (layer_tensors.hpp). llama.cpp's converter permutes q/k of `llama`
// (and `smollm3`) files so that RoPE rotates adjacent pairs (the others rotate halves), stores Gemma's norm
// weights as 1 + w, and drops what llama.cpp hard-codes (Gemma 3's window pattern and local RoPE base,
// Gemma's query scale, SmolLM3's NoPE step); a missing output.weight means tied embeddings. Llama 3 RoPE
// scaling arrives as a rope_freqs.weight tensor of per-frequency divisors, Phi-3's longrope as
// rope_factors_short/long.weight. Gemma 4's own keys: gguf_gemma4_keys.hpp.
// Mixtures of experts (qwen2moe, qwen3moe, olmoe, gpt-oss, and `llama` with experts for Mixtral) stack
// each layer's experts in 3-D tensors (gpt-oss's biases in 2-D ones), split here into per-expert views of
// the mapping.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/model/family.hpp"
#include "engine/model/gguf.hpp"
#include "engine/model/gguf_gemma4_keys.hpp"
#include "engine/model/gguf_hybrid_keys.hpp"
#include "engine/model/layer_reader.hpp"
#include "engine/model/model_checks.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/model/gguf_tokenizer.hpp"

namespace cbatch {
namespace {

int config_int(const GgufFile& gguf, const std::string& key, int64_t fallback = -1) {
  const int64_t value = fallback < 0 ? gguf.get_int(key) : gguf.get_int(key, fallback);
  if (value < 0 || value > INT32_MAX) {
    throw Error("'" + gguf.path() + "': " + key + " = " + std::to_string(value) + " is out of range");
  }
  return static_cast<int>(value);
}

// An integer key, or the largest of a per-layer array of them (llama.cpp's hybrids write head_count_kv, and
// Nemotron-H feed_forward_length, per layer, 0 on the layers without).
int config_int_or_max(const GgufFile& gguf, const std::string& key, int64_t fallback = -1) {
  const GgufValue* v = gguf.find(key);
  if (v == nullptr || v->type != GgufType::kArray) return config_int(gguf, key, fallback);
  const std::vector<int64_t>& values = gguf.get_ints(key);
  const int64_t most = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
  if (most < 1 || most > INT32_MAX) throw Error("'" + gguf.path() + "': " + key + " holds no positive value");
  return static_cast<int>(most);
}

int read_vocab_size(const GgufFile& gguf, const std::string& arch) {
  if (gguf.find("tokenizer.ggml.tokens"))
    return static_cast<int>(gguf.get_strings("tokenizer.ggml.tokens").size());
  if (gguf.find(arch + ".vocab_size")) return config_int(gguf, arch + ".vocab_size");
  const GgufTensorInfo* embd = gguf.find_tensor(std::string(model_row(ModelTensor::kEmbedding).gguf));
  return embd ? static_cast<int>(embd->rows()) : 0;
}

// rope_freqs.weight holds, per frequency, the divisor llama3 scaling applies; accept it when it equals
// Meta's llama3 recipe (low 1, high 4, factor = the largest divisor) and record that recipe.
void read_llama3_scaling(const GgufFile& gguf, const std::string& arch, ModelConfig& config) {
  const GgufTensorInfo* info = gguf.find_tensor("rope_freqs.weight");
  if (info == nullptr) return;
  const TensorView view = gguf.tensor_view(*info);
  const int half = config.head_dim / 2;
  if (view.numel() != half) {
    throw Error("'" + gguf.path() + "': rope_freqs.weight has " + std::to_string(view.numel()) +
                " values, expected head_dim / 2 = " + std::to_string(half));
  }
  std::vector<float> divisors(half), scaled(half), plain(half);
  tensor_rows_to_f32(view, 0, view.rows, divisors.data());
  ModelConfig unscaled = config;
  rope_inv_freq(unscaled, plain.data());
  RopeScaling& s = config.rope_scaling;
  s.type = RopeScalingType::kLlama3;
  s.factor = *std::max_element(divisors.begin(), divisors.end());
  s.original_max_position = config_int(gguf, arch + ".rope.scaling.original_context_length", 8192);
  rope_inv_freq(config, scaled.data());
  for (int i = 0; i < half; ++i) {
    if (std::fabs(plain[i] / divisors[i] - scaled[i]) > 1e-4f * scaled[i]) {
      throw Error("'" + gguf.path() +
                  "': rope_freqs.weight is not llama3 RoPE scaling (low_freq_factor 1, "
                  "high_freq_factor 4); other frequency tables are not supported");
    }
  }
}

TensorView require_tensor(const GgufFile& gguf, const std::string& name) {
  const GgufTensorInfo* info = gguf.find_tensor(name);
  if (info == nullptr) throw Error("'" + gguf.path() + "': tensor '" + name + "' is missing");
  return gguf.tensor_view(*info);
}

RopeScaling read_rope_scaling(const GgufFile& gguf, const std::string& p) {
  RopeScaling s;
  const std::string type = gguf.get_string(p + "rope.scaling.type", "none");
  s.factor = static_cast<float>(gguf.get_float(p + "rope.scaling.factor", 1.0));
  s.original_max_position = config_int(gguf, p + "rope.scaling.original_context_length", 8192);
  if (type == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (type == "yarn") {
    s.type = RopeScalingType::kYarn;
    s.beta_fast = static_cast<float>(gguf.get_float(p + "rope.scaling.yarn_beta_fast", 32.0));
    s.beta_slow = static_cast<float>(gguf.get_float(p + "rope.scaling.yarn_beta_slow", 1.0));
    const double mscale = s.factor > 1.0f ? 0.1 * std::log(s.factor) + 1.0 : 1.0;
    s.attention_factor = static_cast<float>(gguf.get_float(p + "rope.scaling.attn_factor", mscale));
  } else if (type != "none") {
    throw Error("'" + gguf.path() + "': " + p + "rope.scaling.type '" + type +
                "' is not supported (supported: none, linear, yarn; llama3 via rope_freqs.weight)");
  }
  if (!(s.factor >= 1.0f)) throw Error("'" + gguf.path() + "': " + p + "rope.scaling.factor must be at least 1");
  return s;
}

// Phi-3 longrope: the per-frequency divisors as two tensors.
void read_longrope(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  const GgufTensorInfo* long_info = gguf.find_tensor("rope_factors_long.weight");
  if (long_info == nullptr) return;
  auto read = [&](const char* name) {
    const TensorView view = require_tensor(gguf, name);
    if (view.numel() != c.head_dim / 2) {
      throw Error("'" + gguf.path() + "': " + name + " has " + std::to_string(view.numel()) + " values, expected " +
                  std::to_string(c.head_dim / 2));
    }
    std::vector<float> values(static_cast<size_t>(view.numel()));
    tensor_rows_to_f32(view, 0, view.rows, values.data());
    return values;
  };
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::kLongrope;
  s.long_factor = read("rope_factors_long.weight");
  s.short_factor = gguf.find_tensor("rope_factors_short.weight") ? read("rope_factors_short.weight") : s.long_factor;
  s.original_max_position = config_int(gguf, p + "rope.scaling.original_context_length", c.max_context);
  const double factor = static_cast<double>(c.max_context) / s.original_max_position;
  const double attention = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(s.original_max_position));
  s.attention_factor = static_cast<float>(gguf.get_float(p + "rope.scaling.attn_factor", attention));
}

// Gemma's query scale: query_pre_attn_scalar is not stored; llama.cpp uses head_dim except for the 27B
// models (46 layers in Gemma 2, 62 in Gemma 3), whose scalar is dim / heads. attention.scale wins if present.
float gemma_query_scale(const GgufFile& gguf, const std::string& p, const ModelConfig& c) {
  if (gguf.find(p + "attention.scale")) return static_cast<float>(gguf.get_float(p + "attention.scale", 0.0));
  const bool is_27b = (c.architecture == "gemma2" && c.num_layers == 46) || (c.architecture == "gemma3" && c.num_layers == 62);
  return 1.0f / std::sqrt(static_cast<float>(is_27b ? c.dim / c.num_heads : c.head_dim));
}

void read_family_keys(const GgufFile& gguf, const Family& family, const std::string& p, ModelConfig& c) {
  apply_family(family, c);
  c.rope_layout = family.gguf_rope_layout;
  c.norm_offset = 0.0f;  // Gemma's norms are stored as 1 + w
  if (family.gemma_norms && !family.gemma4_layers) {
    c.attn_scale = gemma_query_scale(gguf, p, c);
    c.attn_softcap = static_cast<float>(gguf.get_float(p + "attn_logit_softcapping", family.default_attn_softcap));
    c.final_softcap = static_cast<float>(gguf.get_float(p + "final_logit_softcapping", family.default_final_softcap));
  } else if (gguf.find(p + "attention.scale")) {
    c.attn_scale = static_cast<float>(gguf.get_float(p + "attention.scale", 0.0));
  }
  if (family.gemma4_layers) {  // its windows, local base and query scale: gguf_gemma4_keys.cpp
    c.final_softcap = static_cast<float>(gguf.get_float(p + "final_logit_softcapping", 0.0));
    return;
  }
  const int window = config_int(gguf, p + "attention.sliding_window", 0);
  // Qwen's use_sliding_window is not stored (llama.cpp runs Qwen without one); a `llama` file that names a
  // window (Mistral 7B v0.1) applies it to every layer.
  Family windows = family;
  if (family.window_layers == WindowLayers::kFromLayer) windows.window_layers = WindowLayers::kNone;
  if (family.window_layers == WindowLayers::kNone) windows.window_layers = WindowLayers::kAll;
  const int pattern = config_int(gguf, p + "attention.sliding_window_pattern", family.gguf_window_pattern);
  c.layer_window = family_layer_windows(windows, c.num_layers, window, pattern, 0);
  if (!c.has_window()) c.layer_window.clear();
  c.rope_theta_local = family.gguf_rope_theta_local;
  c.layer_nope = nope_layers_every(c.num_layers, family.nope_interval);  // llama.cpp's step (SmolLM3: 4)
}

// The experts' keys: {arch}.expert_count, expert_used_count, expert_feed_forward_length (Mixtral's `llama`
// files: feed_forward_length), expert_shared_feed_forward_length. The routing rule is the family's (GGUF has
// no key for it). A layer is sparse when it has a router or expert tensors.
void read_moe_keys(const GgufFile& gguf, const Family& family, const std::string& p, ModelConfig& c) {
  const std::string count_key = p + "expert_count", used_key = p + "expert_used_count";
  c.num_experts = config_int(gguf, count_key, 0);
  if (c.num_experts < 1 || c.num_experts > kMaxExperts) {
    throw Error("'" + gguf.path() + "': " + count_key + " = " + std::to_string(c.num_experts) + " is out of range (1.." +
                std::to_string(kMaxExperts) + ")");
  }
  c.experts_per_token = config_int(gguf, used_key, 0);
  if (c.experts_per_token < 1 || c.experts_per_token > c.num_experts) {
    throw Error("'" + gguf.path() + "': " + used_key + " = " + std::to_string(c.experts_per_token) +
                " must be between 1 and " + count_key + " (" + std::to_string(c.num_experts) + ")");
  }
  c.expert_hidden_dim = config_int(gguf, p + "expert_feed_forward_length", config_int(gguf, p + "feed_forward_length", 0));
  if (family.shared_expert || family.granite_multipliers) {
    c.shared_expert_gate = !family.granite_multipliers;  // Granite's shared MLP has no gate
    const GgufTensorInfo* up = gguf.find_tensor("blk.0." + std::string(layer_row(LayerTensor::kSharedUp).gguf[0]));
    c.shared_expert_hidden_dim = config_int(gguf, p + "expert_shared_feed_forward_length", up ? up->rows() : 0);
  }
  c.norm_topk_prob = family.gguf_norm_topk_prob;
  c.layer_sparse.assign(static_cast<size_t>(std::clamp(c.num_layers, 0, 1 << 12)), 0);
  for (size_t l = 0; l < c.layer_sparse.size(); ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (gguf.find_tensor(b + std::string(layer_row(LayerTensor::kRouter).gguf[0]))) c.layer_sparse[l] = 1;
    for (const ExpertTensorRow& row : expert_tensor_rows()) {
      if (row.role == Role::kRoutedExpert && gguf.find_tensor(b + std::string(row.gguf))) c.layer_sparse[l] = 1;
    }
  }
}

ModelConfig read_config(const GgufFile& gguf, std::vector<std::string>& notes) {
  const std::string arch = gguf.get_string("general.architecture");
  const Family* family = find_gguf_family(arch, gguf.get_int(arch + ".expert_count", 0) > 0);
  if (family == nullptr) {
    throw Error("'" + gguf.path() + "': " + unsupported_family_message(arch));
  }
  if (family->bert_encoder) {
    throw Error("'" + gguf.path() + "': " + arch + " GGUF files are not supported yet; use the Hugging Face directory");
  }
  const std::string p = arch + ".";
  ModelConfig c;
  c.dim = config_int(gguf, p + "embedding_length");
  c.num_layers = config_int(gguf, p + "block_count");
  c.num_heads = config_int(gguf, p + "attention.head_count");
  if (family->gemma4_layers) {  // per-layer arrays and its own head keys
    read_gemma4_keys(gguf, p, c);
  } else {
    c.hidden_dim = config_int_or_max(gguf, p + "feed_forward_length",
                                     family->moe ? config_int(gguf, p + "expert_feed_forward_length", 0) : -1);
    c.num_kv_heads = config_int_or_max(gguf, p + "attention.head_count_kv", c.num_heads);
    const int default_head_dim = c.num_heads > 0 ? c.dim / c.num_heads : 0;
    c.head_dim = config_int(gguf, p + "attention.key_length",
                            config_int(gguf, p + "rope.dimension_count", default_head_dim));
  }
  c.vocab_size = read_vocab_size(gguf, arch);
  c.max_context = config_int(gguf, p + "context_length");
  c.rms_eps = static_cast<float>(gguf.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = static_cast<float>(gguf.get_float(p + "rope.freq_base", 10000.0));
  c.tied_embeddings = gguf.find_tensor(std::string(model_row(ModelTensor::kLmHead).gguf)) == nullptr;
  read_hybrid_keys(gguf, *family, p, c, notes);
  read_family_keys(gguf, *family, p, c);
  read_ssm_keys(gguf, *family, p, c);
  // Granite 4.0-H's files name experts or not (its dense and MoE models share the architecture).
  const bool hybrid_experts = has_recurrent_kind(*family) && gguf.get_int(p + "expert_count", 0) > 0;
  if (family->moe || hybrid_experts) read_moe_keys(gguf, *family, p, c);
  check_model_config(c, gguf.path());
  c.rope_scaling = read_rope_scaling(gguf, p);
  c.rope_scaling.truncate = family->gguf_yarn_truncate;
  if (!family->gemma4_layers) read_llama3_scaling(gguf, arch, c);  // Gemma 4's rope_freqs: its proportional RoPE
  read_longrope(gguf, p, c);
  return c;
}

// The file's tensors by name, for the shared layer reader.
class GgufTensors final : public TensorFile {
 public:
  explicit GgufTensors(const GgufFile& gguf) : gguf_(gguf) {}
  bool has(const std::string& name) const override { return gguf_.find_tensor(name) != nullptr; }
  TensorView view(const std::string& name) const override { return require_tensor(gguf_, name); }
  std::string path() const override { return gguf_.path(); }

 private:
  const GgufFile& gguf_;
};

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text;
  for (int64_t v : dims) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return "[" + text + "]";
}

// A stacked expert tensor (ggml dims [cols, rows, num_experts], a vector's [cols, num_experts]) as
// num_experts views of (rows, cols).
std::vector<TensorView> expert_views(const GgufFile& gguf, const std::string& name, int64_t rows, int64_t cols,
                                     int num_experts) {
  const GgufTensorInfo* info = gguf.find_tensor(name);
  if (info == nullptr) throw Error("'" + gguf.path() + "': tensor '" + name + "' is missing");
  const std::vector<int64_t> dims = rows == 1 ? std::vector<int64_t>{cols, num_experts}
                                              : std::vector<int64_t>{cols, rows, num_experts};
  if (info->dims != dims) {
    throw Error("'" + gguf.path() + "': tensor '" + name + "' has dims " + dims_text(info->dims) +
                ", the config needs " + dims_text(dims) + " (expert_count " + std::to_string(num_experts) + ")");
  }
  const TensorView all = gguf.tensor_view(*info);
  std::vector<TensorView> views;
  for (int e = 0; e < num_experts; ++e) {
    views.push_back(row_slice(all, e * rows, rows));
    views.back().name = name + "[expert " + std::to_string(e) + "]";
  }
  return views;
}

// A sparse layer's routed experts, row by row of the expert table: stacked (as llama.cpp has written them
// since April 2024), else one tensor per expert (the layout of earlier Mixtral files, which llama.cpp
// still loads and many published files keep). The shape checks check those.
void read_experts(const GgufFile& gguf, const std::string& b, const ModelConfig& c, LayerTensors& l) {
  const int n = c.num_experts;
  l.experts.resize(static_cast<size_t>(n));
  // Gate and up fused as ffn_gate_up_exps (Gemma 4's converter): per expert (2 width, dim), gate rows first.
  const std::string fused = b + "ffn_gate_up_exps.weight";
  const bool gate_up = gguf.find_tensor(fused) != nullptr && gguf.find_tensor(b + std::string(expert_row(ExpertTensor::kGate).gguf)) == nullptr;
  if (gate_up) {
    const int64_t width = c.expert_hidden_dim;
    const std::vector<TensorView> views = expert_views(gguf, fused, 2 * width, c.dim, n);
    for (int e = 0; e < n; ++e) {
      l.experts[static_cast<size_t>(e)][ExpertTensor::kGate] = row_slice(views[static_cast<size_t>(e)], 0, width);
      l.experts[static_cast<size_t>(e)][ExpertTensor::kUp] = row_slice(views[static_cast<size_t>(e)], width, width);
    }
  }
  for (const ExpertTensorRow& row : expert_tensor_rows()) {
    if (!row.present(c)) continue;
    if (gate_up && (row.kind == ExpertTensor::kGate || row.kind == ExpertTensor::kUp)) continue;
    const std::string stacked = b + std::string(row.gguf);
    const bool per_expert = !row.gguf_per_expert.empty() && gguf.find_tensor(stacked) == nullptr &&
                            gguf.find_tensor(b + expert_name(row.gguf_per_expert, 0)) != nullptr;
    std::vector<TensorView> views;
    if (per_expert) {
      for (int e = 0; e < n; ++e) views.push_back(require_tensor(gguf, b + expert_name(row.gguf_per_expert, e)));
    } else {
      views = expert_views(gguf, stacked, size_of(row.shape.rows, c), size_of(row.shape.cols, c), n);
    }
    for (int e = 0; e < n; ++e) l.experts[static_cast<size_t>(e)][row.kind] = views[static_cast<size_t>(e)];
  }
}

// A layer's tensors under llama.cpp's names (the table's GGUF column), the experts of a sparse one.
LayerTensors read_layer(const GgufFile& gguf, const std::string& b, const ModelConfig& c, int layer) {
  const std::string up = b + std::string(layer_row(LayerTensor::kUp).gguf[0]);
  if (c.is_moe() && !c.is_sparse(layer) && gguf.find_tensor(up) == nullptr) {
    throw Error("'" + gguf.path() + "': tensor '" + b + std::string(layer_row(LayerTensor::kRouter).gguf[0]) +
                "' is missing (a layer has neither experts nor a dense FFN)");
  }
  LayerTensors l = read_layer_rows(GgufTensors(gguf), Dialect::kGguf, b, c, layer);
  if (c.is_sparse(layer)) read_experts(gguf, b, c, l);
  return l;
}

// The model's tensors by the table's GGUF column; a missing output.weight means tied embeddings.
ModelTensors read_tensors(const GgufFile& gguf, const ModelConfig& c) {
  ModelTensors t;
  for (const ModelTensorRow& row : model_tensor_rows()) {
    if (!row.present(c)) continue;
    if (row.gguf.empty()) {
      throw Error("'" + gguf.path() + "': GGUF files have no " + std::string(row.label) + " tensor");
    }
    const bool other = !row.gguf_other.empty() && !gguf.find_tensor(std::string(row.gguf)) &&
                       gguf.find_tensor(std::string(row.gguf_other));
    t[row.kind] = row.kind == ModelTensor::kLmHead && c.tied_embeddings
                      ? t[ModelTensor::kEmbedding]
                      : require_tensor(gguf, std::string(other ? row.gguf_other : row.gguf));
  }
  for (int i = 0; i < c.num_layers; ++i) t.layers.push_back(read_layer(gguf, "blk." + std::to_string(i) + ".", c, i));
  return t;
}

}  // namespace

Model load_gguf_model(const ModelSource& source) {
  const GgufFile gguf(source.path);
  Model model;
  model.path = source.path;
  model.format = "gguf";
  model.config = read_config(gguf, model.notes);
  model.tensors = read_tensors(gguf, model.config);
  model.weight_dtype = dominant_dtype(model.tensors);
  model.tokenizer = load_gguf_tokenizer(gguf);
  model.chat_template = gguf.get_string("tokenizer.chat_template", "");
  model.storage = gguf.mapping();
  return model;
}

std::unique_ptr<Tokenizer> load_gguf_model_tokenizer(const std::string& path, std::string* chat_template) {
  const GgufFile gguf(path);
  *chat_template = gguf.get_string("tokenizer.chat_template", "");
  return load_gguf_tokenizer(gguf);
}

}  // namespace cbatch
