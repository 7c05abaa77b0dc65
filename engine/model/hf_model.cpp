// A Hugging Face model directory as a Model: config.json, the weights of model.safetensors or of the
// shards model.safetensors.index.json lists (each memory-mapped, views straight into the mappings),
// and the tokenizer and chat template (hf_tokenizer.cpp). HF stores q_proj/k_proj for rotate-half
// RoPE, so the rope layout is kHalves. With tie_word_embeddings the lm_head is the embedding. The tensors
// are the table's Hugging Face columns (layer_tensors.hpp), which of them a model has the family's
// (hf_config.cpp read it from model_type); a sparse layer of a mixture of experts has a router and
// per-expert projections instead of the dense FFN (gpt-oss's stacked experts, bf16 or MXFP4, are
// rearranged into owned buffers: hf_stacked_experts.hpp). BERT and XLM-R encoders (model_type bert,
// xlm-roberta) have their own names and no lm_head; a cross-encoder adds its pooler and classifier.
// A pre-quantized checkpoint's Linear weights (GPTQ, AWQ, compressed-tensors, FP8: config.json's
// quantization_config) become tensors the loader owns as they are read (hf_quantized.hpp): GGUF blocks of
// the integer codes, cbatch's FP8 and NVFP4 blocks, or f32; each view holds its buffer (TensorView::owner),
// so a backend that takes the tensors (take_tensors) frees them once it has packed them.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "engine/base/error.hpp"
#include "engine/model/family.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/model/hf_quantized.hpp"
#include "engine/model/hf_stacked_experts.hpp"
#include "engine/model/layer_reader.hpp"
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

// Buffers the loader made (rearranged experts) that the views point into, held by those views.
using OwnedBuffers = std::vector<std::shared_ptr<const std::vector<uint8_t>>>;

// Tensor name -> the file that holds it; a weight stored quantized is expanded when viewed.
class WeightFiles final : public TensorFile {
 public:
  WeightFiles(const std::string& dir, QuantizationConfig quantization) : quantization_(std::move(quantization)) {
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

  TensorView view(const std::string& name) const override {
    if (is_stored_quantized(file_of_, quantization_, name)) {
      OwnedTensor t = read_quantized(file_of_, quantization_, name);
      ++num_quantized_;
      if (t.view.dtype == DType::kF32) ++num_f32_;
      t.view.owner = std::move(t.bytes);
      return t.view;
    }
    auto it = owner_.find(name);
    if (it == owner_.end()) throw Error("'" + description_ + "': tensor '" + name + "' is missing");
    return it->second->view(name);
  }
  bool has(const std::string& name) const override {
    return owner_.count(name) != 0 || is_stored_quantized(file_of_, quantization_, name);
  }
  std::string path() const override { return description_; }
  const SafetensorsFile* file_of(const std::string& name) const {
    auto it = owner_.find(name);
    return it == owner_.end() ? nullptr : it->second;
  }
  std::shared_ptr<const void> storage() const { return files_; }
  // Quantized weights read, and how many of them became f32.
  int num_quantized() const { return num_quantized_; }
  int num_f32() const { return num_f32_; }

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
  QuantizationConfig quantization_;
  const TensorFileOf file_of_ = [this](const std::string& name) { return file_of(name); };
  mutable int num_quantized_ = 0, num_f32_ = 0;
};

// Where the text model's tensors live: "model." (causal LMs), inside a multimodal checkpoint, or
// "backbone." (Nemotron-H).
std::string tensor_prefix(const WeightFiles& w) {
  const HfName& embedding = model_row(ModelTensor::kEmbedding).hf;
  for (const char* prefix : {"model.", "language_model.model.", "model.language_model.", "backbone."}) {
    if (w.has(prefix + std::string(embedding.name))) return prefix;
    for (std::string_view other : embedding.others) {
      if (!other.empty() && w.has(prefix + std::string(other))) return prefix;
    }
  }
  return "model.";  // the error names the tensor the plain layout needs
}

// An encoder's tensors are at the top (BertModel, XLMRobertaModel) or under the family's prefix in a
// checkpoint with a task head ("bert.", "roberta.").
std::string encoder_prefix(const WeightFiles& w, const Family& family) {
  const std::string base(family.hf_base_prefix);
  return w.has(base + std::string(model_row(ModelTensor::kEmbedding).bert.name)) ? base : "";
}

// A model tensor's full name: under the prefix, or at the root (a multimodal checkpoint's root heads are
// under "language_model.").
std::string model_tensor_name(const WeightFiles& w, const HfName& name, const std::string& prefix) {
  if (!name.at_root) {
    for (std::string_view other : name.others) {
      const std::string full = prefix + std::string(other);
      if (!other.empty() && !w.has(prefix + std::string(name.name)) && w.has(full)) return full;
    }
    return prefix + std::string(name.name);
  }
  const std::string multimodal = "language_model." + std::string(name.name);
  return w.has(multimodal) ? multimodal : std::string(name.name);
}

// A sparse layer's routed experts: gpt-oss's stacked ones (hf_stacked_experts.hpp), else each expert's own
// tensors, spelled as the layer's router is (Qwen-MoE's and OLMoE's mlp.experts.M, Mixtral's
// block_sparse_moe.experts.M).
void read_experts(const WeightFiles& w, const std::string& p, const ModelConfig& c, LayerTensors& l) {
  const TensorFileOf file_of = [&w](const std::string& name) { return w.file_of(name); };
  const Family* family = find_family(c.architecture);
  const std::string_view module = family != nullptr && family->gemma4_layers ? "" : "mlp.";  // Gemma 4: layers.N.experts
  if (has_stacked_experts(file_of, p, module)) {
    const bool out_in = family != nullptr && family->hf_experts_out_in;
    StackedExperts s = read_stacked_experts(file_of, p, c, out_in ? StackedLayout::kOutIn : StackedLayout::kInOutInterleaved,
                                            module);
    l.experts = std::move(s.experts);
    const auto owner = std::make_shared<const OwnedBuffers>(std::move(s.buffers));  // the layer's experts share them
    for (ExpertTensors& expert : l.experts) {
      for (TensorView& view : expert.items) {
        if (!view.empty() && !view.is_random) view.owner = owner;
      }
    }
    return;
  }
  const int spelling = std::max(0, spelling_in_file(w, p, layer_row(LayerTensor::kRouter).hf));
  auto name = [&](const ExpertTensorRow& row, int expert) {
    const std::string_view pattern = row.hf[static_cast<size_t>(spelling)];
    return p + expert_name(pattern.empty() ? row.hf[0] : pattern, expert);
  };
  l.experts.resize(static_cast<size_t>(c.num_experts));
  for (int e = 0; e < c.num_experts; ++e) {
    for (const ExpertTensorRow& row : expert_tensor_rows()) {
      if (row.present(c)) l.experts[static_cast<size_t>(e)][row.kind] = w.view(name(row, e));
    }
  }
  const std::string extra = name(expert_tensor_rows().front(), c.num_experts);
  if (w.has(extra)) {
    throw Error("tensor '" + extra + "': the config says " + std::to_string(c.num_experts) +
                " experts, the files hold more");
  }
}

// One layer's rows under the table's names (decoders' or BERT's), and the experts of a sparse one.
LayerTensors read_layer(const WeightFiles& w, Dialect dialect, const std::string& p, const ModelConfig& c, int layer) {
  LayerTensors l = read_layer_rows(w, dialect, p, c, layer);
  if (c.is_sparse(layer)) read_experts(w, p, c, l);
  return l;
}

ModelTensors read_tensors(const WeightFiles& w, const ModelConfig& c) {
  const Family* family = find_family(c.architecture);
  const bool encoder = family != nullptr && family->bert_encoder;
  const std::string prefix = encoder ? encoder_prefix(w, *family) : tensor_prefix(w);
  ModelTensors t;
  for (const ModelTensorRow& row : model_tensor_rows()) {
    if (!row.present(c)) continue;
    if (row.kind == ModelTensor::kLmHead && c.tied_embeddings) {
      t[row.kind] = t[ModelTensor::kEmbedding];
      continue;
    }
    const HfName& name = !encoder                                                  ? row.hf
                         : family->roberta_classifier && !row.roberta.name.empty() ? row.roberta
                                                                                   : row.bert;
    if (name.name.empty()) {
      throw Error("'" + w.path() + "': " + c.architecture + " checkpoints have no " + std::string(row.label) + " tensor");
    }
    t[row.kind] = w.view(model_tensor_name(w, name, prefix));
  }
  const std::string layers = prefix + (encoder ? "encoder.layer." : "layers.");
  for (int i = 0; i < c.num_layers; ++i) {
    t.layers.push_back(read_layer(w, encoder ? Dialect::kBert : Dialect::kHf, layers + std::to_string(i) + ".", c, i));
  }
  return t;
}

}  // namespace

Model load_hf_model(const ModelSource& source) {
  const std::string& dir = source.path;
  const std::string config_path = in_dir(dir, "config.json");
  if (!fs::exists(config_path)) throw Error("'" + dir + "': a Hugging Face model directory needs config.json");
  const HfConfig hf = read_hf_config(config_path);
  const QuantizationConfig quantization = read_quantization_config(config_path);
  const WeightFiles weights(dir, quantization);
  Model model;
  model.path = dir;
  model.format = "hf";
  model.config = hf.config;
  model.notes = hf.notes;
  model.tensors = read_tensors(weights, hf.config);
  model.quantization = describe_quantization(quantization);
  if (keeps_int_codes(quantization) && weights.num_f32() > 0) {  // said, not a quiet fallback
    model.notes.push_back(std::to_string(weights.num_f32()) + " of " + std::to_string(weights.num_quantized()) +
                          " quantized weights expanded to f32: no GGUF block type holds their codes exactly (groups "
                          "that are not whole 32-input blocks, a scale that is not an fp16 number, or 8-bit codes "
                          "outside [-128, 127])");
  } else if (is_fp8(quantization) && weights.num_f32() > 0) {
    model.notes.push_back(std::to_string(weights.num_f32()) + " of " + std::to_string(weights.num_quantized()) +
                          " FP8 weights expanded to f32: their inputs or scale blocks are not whole 32-input blocks");
  }
  model.weight_dtype = dominant_dtype(model.tensors);
  model.tokenizer = load_hf_tokenizer(dir, hf.bos_id, hf.eos_ids, &model.chat_template);
  model.embedding = read_sentence_transformers(dir);
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
  return load_hf_tokenizer(dir, hf.bos_id, hf.eos_ids, chat_template);
}

}  // namespace cbatch
