// A Hugging Face model directory as a Model: config.json, the weights of model.safetensors or of the
// shards model.safetensors.index.json lists (each memory-mapped, views straight into the mappings),
// and the tokenizer and chat template (hf_tokenizer.cpp). HF stores q_proj/k_proj for rotate-half
// RoPE, so the rope layout is kHalves. With tie_word_embeddings the lm_head is the embedding. Which
// optional tensors a layer has follows the family (hf_config.cpp read it from model_type); a sparse layer
// of a mixture of experts has a router and per-expert projections instead of the dense FFN (gpt-oss's
// stacked experts, bf16 or MXFP4, are rearranged into owned buffers: hf_stacked_experts.hpp). BERT and
// XLM-R encoders (model_type bert, xlm-roberta) have their own names and no lm_head; a cross-encoder adds
// its pooler and classifier.
#include <filesystem>
#include <map>
#include <set>

#include "engine/base/error.hpp"
#include "engine/model/family.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/model/hf_stacked_experts.hpp"
#include "engine/text/hf_tokenizer.hpp"
#include "engine/base/json_file.hpp"
#include "engine/model/model_checks.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/model/safetensors.hpp"
#include "engine/model/sentence_transformers.hpp"

namespace cbatch {
namespace {

namespace fs = std::filesystem;

std::string in_dir(const std::string& dir, const char* name) { return (fs::path(dir) / name).string(); }

// Tensor name -> the file that holds it.
class WeightFiles {
 public:
  explicit WeightFiles(const std::string& dir) {
    const std::string single = in_dir(dir, "model.safetensors");
    const std::string index = in_dir(dir, "model.safetensors.index.json");
    if (fs::exists(single)) {
      add_file(single);
    } else if (fs::exists(index)) {
      read_index(dir, index);
    } else {
      throw Error("'" + dir + "': a Hugging Face model directory needs model.safetensors or "
                  "model.safetensors.index.json");
    }
  }

  TensorView view(const std::string& name) const {
    auto it = owner_.find(name);
    if (it == owner_.end()) throw Error("'" + description_ + "': tensor '" + name + "' is missing");
    return it->second->view(name);
  }
  bool has(const std::string& name) const { return owner_.count(name) != 0; }
  const SafetensorsFile* file_of(const std::string& name) const {
    auto it = owner_.find(name);
    return it == owner_.end() ? nullptr : it->second;
  }
  std::shared_ptr<const void> storage() const { return files_; }

 private:
  const SafetensorsFile& add_file(const std::string& path) {
    files_->push_back(std::make_unique<SafetensorsFile>(path));
    const SafetensorsFile& file = *files_->back();
    for (const auto& [name, tensor] : file.tensors()) owner_.emplace(name, &file);
    description_ = description_.empty() ? path : description_;
    return file;
  }

  void read_index(const std::string& dir, const std::string& index_path) {
    const JsonFile index(index_path);
    const JsonFields fields = index.fields();
    std::map<std::string, const SafetensorsFile*> by_shard;
    for (auto [name, value] : fields.members("weight_map")) {
      std::string_view shard;
      if (value.get_string().get(shard)) fields.fail("weight_map", "must map tensor names to file names");
      if (shard.find('/') != std::string_view::npos) fields.fail("weight_map", "names a file outside the directory: " + std::string(shard));
      auto it = by_shard.find(std::string(shard));
      if (it == by_shard.end()) it = by_shard.emplace(std::string(shard), &add_file(in_dir(dir, std::string(shard).c_str()))).first;
      if (!it->second->has(name)) {
        throw Error("'" + index_path + "': weight_map puts '" + std::string(name) + "' in " + std::string(shard) +
                    ", which does not hold it");
      }
      owner_[std::string(name)] = it->second;
    }
    description_ = index_path;
  }

  std::shared_ptr<std::vector<std::unique_ptr<SafetensorsFile>>> files_ =
      std::make_shared<std::vector<std::unique_ptr<SafetensorsFile>>>();
  std::map<std::string, const SafetensorsFile*> owner_;
  std::string description_;
};

// Where the text model's tensors live: "model." (causal LMs), or inside a multimodal Gemma 3 checkpoint.
std::string tensor_prefix(const WeightFiles& w) {
  for (const char* prefix : {"model.", "language_model.model.", "model.language_model."}) {
    if (w.has(std::string(prefix) + "embed_tokens.weight")) return prefix;
  }
  return "model.";  // the error names the tensor the plain layout needs
}

std::string lm_head_name(const WeightFiles& w) {
  return w.has("language_model.lm_head.weight") ? "language_model.lm_head.weight" : "lm_head.weight";
}

// Buffers the loader made (rearranged tensors) that the views point into, kept with the mapped files.
using OwnedBuffers = std::vector<std::shared_ptr<const std::vector<uint8_t>>>;

// gpt-oss: mlp.router.{weight,bias} and the stacked experts under mlp.experts.
void read_stacked(const WeightFiles& w, const std::string& p, const ModelConfig& c, LayerTensors& l,
                  OwnedBuffers& owned) {
  l.router = w.view(p + "mlp.router.weight");
  if (c.router_bias) l.router_bias = w.view(p + "mlp.router.bias");
  const TensorFileOf file_of = [&w](const std::string& name) { return w.file_of(name); };
  StackedExperts s = read_stacked_experts(file_of, p + "mlp.experts.", c.num_experts, c.dim, c.expert_hidden_dim);
  l.experts = std::move(s.experts);
  owned.insert(owned.end(), s.buffers.begin(), s.buffers.end());
}

// A sparse layer's router and experts: mlp.gate, mlp.experts.M.{gate,up,down}_proj (Qwen-MoE, OLMoE; Qwen2-MoE
// adds mlp.shared_expert and mlp.shared_expert_gate) or Mixtral's block_sparse_moe.gate and experts.M.{w1,w3,w2}.
void read_experts(const WeightFiles& w, const std::string& p, const ModelConfig& c, LayerTensors& l,
                  OwnedBuffers& owned) {
  if (w.has(p + "mlp.router.weight")) return read_stacked(w, p, c, l, owned);
  const bool mixtral = w.has(p + "block_sparse_moe.gate.weight");
  const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
  l.router = w.view(moe + "gate.weight");
  auto expert = [&](const std::string& e) {
    if (mixtral) return ExpertTensors{w.view(e + "w1.weight"), w.view(e + "w3.weight"), w.view(e + "w2.weight"), {}, {}, {}};
    return ExpertTensors{w.view(e + "gate_proj.weight"), w.view(e + "up_proj.weight"), w.view(e + "down_proj.weight"),
                         {}, {}, {}};
  };
  for (int e = 0; e < c.num_experts; ++e) l.experts.push_back(expert(moe + "experts." + std::to_string(e) + "."));
  const std::string extra = moe + "experts." + std::to_string(c.num_experts) + ".";
  if (w.has(extra + (mixtral ? "w1.weight" : "gate_proj.weight"))) {
    throw Error("tensor '" + extra + (mixtral ? "w1.weight" : "gate_proj.weight") + "': the config says " +
                std::to_string(c.num_experts) + " experts, the files hold more");
  }
  if (c.shared_expert_hidden_dim > 0) {
    l.shared_expert = expert(moe + "shared_expert.");
    l.shared_expert_gate = w.view(moe + "shared_expert_gate.weight");
  }
}

// One layer's tensors under HF's names: Llama's, plus the family's biases, q/k norms, Gemma's sandwich norms
// (its post_attention_layernorm is the attention output's norm, pre_feedforward_layernorm the FFN input's)
// and Phi-3's fused qkv_proj and gate_up_proj (split into views here).
LayerTensors read_layer(const WeightFiles& w, const std::string& p, const ModelConfig& c, int layer,
                        OwnedBuffers& owned) {
  LayerTensors l;
  l.attn_norm = w.view(p + "input_layernorm.weight");
  if (w.has(p + "self_attn.qkv_proj.weight")) {
    const TensorView qkv = w.view(p + "self_attn.qkv_proj.weight");
    l.wq = row_slice(qkv, 0, c.q_dim());
    l.wk = row_slice(qkv, c.q_dim(), c.kv_dim());
    l.wv = row_slice(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
  } else {
    l.wq = w.view(p + "self_attn.q_proj.weight");
    l.wk = w.view(p + "self_attn.k_proj.weight");
    l.wv = w.view(p + "self_attn.v_proj.weight");
  }
  l.wo = w.view(p + "self_attn.o_proj.weight");
  if (c.is_sparse(layer)) {
    read_experts(w, p, c, l, owned);
  } else if (w.has(p + "mlp.gate_up_proj.weight")) {
    const TensorView gate_up = w.view(p + "mlp.gate_up_proj.weight");
    l.w_gate = row_slice(gate_up, 0, c.hidden_dim);
    l.w_up = row_slice(gate_up, c.hidden_dim, c.hidden_dim);
  } else {
    l.w_gate = w.view(p + "mlp.gate_proj.weight");
    l.w_up = w.view(p + "mlp.up_proj.weight");
  }
  if (!c.is_sparse(layer)) l.w_down = w.view(p + "mlp.down_proj.weight");
  if (c.sandwich_norms) {
    l.post_attn_norm = w.view(p + "post_attention_layernorm.weight");
    l.ffn_norm = w.view(p + "pre_feedforward_layernorm.weight");
    l.post_ffn_norm = w.view(p + "post_feedforward_layernorm.weight");
  } else {
    l.ffn_norm = w.view(p + "post_attention_layernorm.weight");
  }
  if (c.qk_norm) {
    l.q_norm = w.view(p + "self_attn.q_norm.weight");
    l.k_norm = w.view(p + "self_attn.k_norm.weight");
  }
  const std::string bias = p + "self_attn.q_proj.bias";
  if (c.qkv_bias) {
    l.bq = w.view(bias);
    l.bk = w.view(p + "self_attn.k_proj.bias");
    l.bv = w.view(p + "self_attn.v_proj.bias");
  } else if (w.has(bias)) {
    throw Error("tensor '" + bias + "': attention biases are not part of the " + c.architecture + " architecture");
  }
  if (c.o_bias) l.bo = w.view(p + "self_attn.o_proj.bias");
  if (c.attn_sinks) l.sinks = w.view(p + "self_attn.sinks");
  return l;
}

// BERT's names (BertModel, or under "bert." in a checkpoint with a task head): post-norm layers, so a
// layer's attn_norm is attention.output.LayerNorm (after the attention) and its ffn_norm output.LayerNorm.
LayerTensors read_bert_layer(const WeightFiles& w, const std::string& p) {
  LayerTensors l;
  const std::string self = p + "attention.self.", out = p + "attention.output.";
  l.wq = w.view(self + "query.weight");
  l.wk = w.view(self + "key.weight");
  l.wv = w.view(self + "value.weight");
  l.bq = w.view(self + "query.bias");
  l.bk = w.view(self + "key.bias");
  l.bv = w.view(self + "value.bias");
  l.wo = w.view(out + "dense.weight");
  l.bo = w.view(out + "dense.bias");
  l.attn_norm = w.view(out + "LayerNorm.weight");
  l.attn_norm_bias = w.view(out + "LayerNorm.bias");
  l.w_up = w.view(p + "intermediate.dense.weight");
  l.b_up = w.view(p + "intermediate.dense.bias");
  l.w_down = w.view(p + "output.dense.weight");
  l.b_down = w.view(p + "output.dense.bias");
  l.ffn_norm = w.view(p + "output.LayerNorm.weight");
  l.ffn_norm_bias = w.view(p + "output.LayerNorm.bias");
  return l;
}

// The base model's tensors are at the top (BertModel, XLMRobertaModel) or under the family's prefix in a
// checkpoint with a task head ("bert.", "roberta.").
ModelTensors read_bert_tensors(const WeightFiles& w, const ModelConfig& config, const Family& family) {
  const std::string base(family.hf_base_prefix);
  const std::string prefix = w.has(base + "embeddings.word_embeddings.weight") ? base : "";
  const std::string e = prefix + "embeddings.";
  ModelTensors t;
  t.embedding = w.view(e + "word_embeddings.weight");
  t.position_embedding = w.view(e + "position_embeddings.weight");
  t.token_type_embedding = w.view(e + "token_type_embeddings.weight");
  t.embedding_norm = w.view(e + "LayerNorm.weight");
  t.embedding_norm_bias = w.view(e + "LayerNorm.bias");
  for (int i = 0; i < config.num_layers; ++i) {
    t.layers.push_back(read_bert_layer(w, prefix + "encoder.layer." + std::to_string(i) + "."));
  }
  if (!config.is_cross_encoder()) return t;
  if (family.roberta_classifier) {  // XLMRobertaForSequenceClassification: classifier.dense, tanh, out_proj
    t.pooler = w.view("classifier.dense.weight");
    t.pooler_bias = w.view("classifier.dense.bias");
    t.classifier = w.view("classifier.out_proj.weight");
    t.classifier_bias = w.view("classifier.out_proj.bias");
  } else {  // BertForSequenceClassification: bert.pooler.dense, tanh, then classifier
    t.pooler = w.view(prefix + "pooler.dense.weight");
    t.pooler_bias = w.view(prefix + "pooler.dense.bias");
    t.classifier = w.view("classifier.weight");
    t.classifier_bias = w.view("classifier.bias");
  }
  return t;
}

ModelTensors read_tensors(const WeightFiles& w, const ModelConfig& config, OwnedBuffers& owned) {
  const Family* family = find_family(config.architecture);
  if (family != nullptr && family->bert_encoder) return read_bert_tensors(w, config, *family);
  const std::string prefix = tensor_prefix(w);
  ModelTensors t;
  t.embedding = w.view(prefix + "embed_tokens.weight");
  for (int i = 0; i < config.num_layers; ++i) {
    t.layers.push_back(read_layer(w, prefix + "layers." + std::to_string(i) + ".", config, i, owned));
  }
  t.final_norm = w.view(prefix + "norm.weight");
  t.lm_head = config.tied_embeddings ? t.embedding : w.view(lm_head_name(w));
  return t;
}

}  // namespace

Model load_hf_model(const ModelSource& source) {
  const std::string& dir = source.path;
  const std::string config_path = in_dir(dir, "config.json");
  if (!fs::exists(config_path)) throw Error("'" + dir + "': a Hugging Face model directory needs config.json");
  const HfConfig hf = read_hf_config(config_path);
  const WeightFiles weights(dir);
  Model model;
  model.path = dir;
  model.format = "hf";
  model.config = hf.config;
  OwnedBuffers owned;
  model.tensors = read_tensors(weights, hf.config, owned);
  model.weight_dtype = dominant_dtype(model.tensors);
  model.tokenizer = load_hf_tokenizer(dir, hf.bos_id, hf.eos_ids, &model.chat_template);
  model.embedding = read_sentence_transformers(dir);
  if (owned.empty()) {
    model.storage = weights.storage();
  } else {
    using Storage = std::pair<std::shared_ptr<const void>, OwnedBuffers>;
    model.storage = std::make_shared<Storage>(weights.storage(), std::move(owned));
  }
  return model;
}

std::unique_ptr<Tokenizer> load_hf_model_tokenizer(const std::string& dir, std::string* chat_template) {
  const std::string config_path = in_dir(dir, "config.json");
  HfConfig hf;
  if (fs::exists(config_path)) {
    const JsonFile config(config_path);  // only the token ids: a tokenizer-only directory has no sizes
    hf.eos_ids = config.fields().get_ids("eos_token_id");
    const std::vector<int32_t> bos = config.fields().get_ids("bos_token_id");
    hf.bos_id = bos.empty() ? -1 : bos[0];
  }
  return load_hf_tokenizer(dir, hf.bos_id, hf.eos_ids, chat_template);
}

}  // namespace cbatch
