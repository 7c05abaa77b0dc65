// A Hugging Face model directory as a Model: config.json, the weights of model.safetensors or of the
// shards model.safetensors.index.json lists (each memory-mapped, views straight into the mappings),
// and the tokenizer and chat template (hf_tokenizer.cpp). HF stores q_proj/k_proj for rotate-half
// RoPE, so the rope layout is kHalves. With tie_word_embeddings the lm_head is the embedding.
#include <filesystem>
#include <map>
#include <set>

#include "engine/core/error.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/text/hf_tokenizer.hpp"
#include "engine/io/json_file.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/model/safetensors.hpp"

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

ModelTensors read_tensors(const WeightFiles& w, const ModelConfig& config) {
  ModelTensors t;
  t.embedding = w.view("model.embed_tokens.weight");
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerTensors l;
    l.attn_norm = w.view(p + "input_layernorm.weight");
    l.wq = w.view(p + "self_attn.q_proj.weight");
    l.wk = w.view(p + "self_attn.k_proj.weight");
    l.wv = w.view(p + "self_attn.v_proj.weight");
    l.wo = w.view(p + "self_attn.o_proj.weight");
    l.ffn_norm = w.view(p + "post_attention_layernorm.weight");
    l.w_gate = w.view(p + "mlp.gate_proj.weight");
    l.w_up = w.view(p + "mlp.up_proj.weight");
    l.w_down = w.view(p + "mlp.down_proj.weight");
    for (const char* bias : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}) {
      if (w.has(p + bias)) throw Error("tensor '" + p + bias + "': attention biases are not supported (Llama has none)");
    }
    t.layers.push_back(std::move(l));
  }
  t.final_norm = w.view("model.norm.weight");
  t.lm_head = config.tied_embeddings ? t.embedding : w.view("lm_head.weight");
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
  model.tensors = read_tensors(weights, hf.config);
  model.weight_dtype = dominant_dtype(model.tensors);
  model.tokenizer = load_hf_tokenizer(dir, hf, &model.chat_template);
  model.storage = weights.storage();
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
  return load_hf_tokenizer(dir, hf, chat_template);
}

}  // namespace cbatch
