// A llama-architecture GGUF as a Model: the config from the llama.* keys, tensor views straight into
// the mapping (Model::storage keeps it alive), the tokenizer from tokenizer.ggml.*. llama.cpp's
// converters permute q/k so that RoPE rotates adjacent pairs; a missing output.weight means tied
// embeddings. Llama 3 RoPE scaling arrives as a rope_freqs.weight tensor of per-frequency divisors.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/model/gguf.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/text/tokenizer_loaders.hpp"

namespace cbatch {
namespace {

int config_int(const GgufFile& gguf, const std::string& key, int64_t fallback = -1) {
  const int64_t value = fallback < 0 ? gguf.get_int(key) : gguf.get_int(key, fallback);
  if (value < 0 || value > INT32_MAX) {
    throw Error("'" + gguf.path() + "': " + key + " = " + std::to_string(value) + " is out of range");
  }
  return static_cast<int>(value);
}

int read_vocab_size(const GgufFile& gguf, const std::string& arch) {
  if (gguf.find("tokenizer.ggml.tokens"))
    return static_cast<int>(gguf.get_strings("tokenizer.ggml.tokens").size());
  if (gguf.find(arch + ".vocab_size")) return config_int(gguf, arch + ".vocab_size");
  const GgufTensorInfo* embd = gguf.find_tensor("token_embd.weight");
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
  s.is_llama3 = true;
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

ModelConfig read_config(const GgufFile& gguf) {
  const std::string arch = gguf.get_string("general.architecture");
  if (arch != "llama") {
    throw Error("'" + gguf.path() + "': architecture '" + arch + "' is not supported yet (supported: llama)");
  }
  const std::string p = arch + ".";
  ModelConfig c;
  c.architecture = arch;
  c.dim = config_int(gguf, p + "embedding_length");
  c.hidden_dim = config_int(gguf, p + "feed_forward_length");
  c.num_layers = config_int(gguf, p + "block_count");
  c.num_heads = config_int(gguf, p + "attention.head_count");
  c.num_kv_heads = config_int(gguf, p + "attention.head_count_kv", c.num_heads);
  const int default_head_dim = c.num_heads > 0 ? c.dim / c.num_heads : 0;
  c.head_dim = config_int(gguf, p + "attention.key_length",
                          config_int(gguf, p + "rope.dimension_count", default_head_dim));
  c.vocab_size = read_vocab_size(gguf, arch);
  c.max_context = config_int(gguf, p + "context_length");
  c.rms_eps = static_cast<float>(gguf.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = static_cast<float>(gguf.get_float(p + "rope.freq_base", 10000.0));
  const std::string scaling = gguf.get_string(p + "rope.scaling.type", "none");
  if (scaling != "none") {
    throw Error("'" + gguf.path() + "': " + p + "rope.scaling.type '" + scaling + "' is not supported");
  }
  c.rope_layout = RopeLayout::kAdjacentPairs;
  c.tied_embeddings = gguf.find_tensor("output.weight") == nullptr;
  check_model_config(c, gguf.path());
  read_llama3_scaling(gguf, arch, c);
  return c;
}

TensorView require_tensor(const GgufFile& gguf, const std::string& name) {
  const GgufTensorInfo* info = gguf.find_tensor(name);
  if (info == nullptr) throw Error("'" + gguf.path() + "': tensor '" + name + "' is missing");
  return gguf.tensor_view(*info);
}

ModelTensors read_tensors(const GgufFile& gguf, const ModelConfig& config) {
  ModelTensors t;
  t.embedding = require_tensor(gguf, "token_embd.weight");
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    LayerTensors l;
    l.attn_norm = require_tensor(gguf, b + "attn_norm.weight");
    l.wq = require_tensor(gguf, b + "attn_q.weight");
    l.wk = require_tensor(gguf, b + "attn_k.weight");
    l.wv = require_tensor(gguf, b + "attn_v.weight");
    l.wo = require_tensor(gguf, b + "attn_output.weight");
    l.ffn_norm = require_tensor(gguf, b + "ffn_norm.weight");
    l.w_gate = require_tensor(gguf, b + "ffn_gate.weight");
    l.w_up = require_tensor(gguf, b + "ffn_up.weight");
    l.w_down = require_tensor(gguf, b + "ffn_down.weight");
    t.layers.push_back(std::move(l));
  }
  t.final_norm = require_tensor(gguf, "output_norm.weight");
  t.lm_head = config.tied_embeddings ? t.embedding : require_tensor(gguf, "output.weight");
  return t;
}

}  // namespace

Model load_gguf_model(const ModelSource& source) {
  const GgufFile gguf(source.path);
  Model model;
  model.path = source.path;
  model.format = "gguf";
  model.config = read_config(gguf);
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
