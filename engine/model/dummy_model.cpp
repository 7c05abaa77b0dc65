// dummy:CONFIG.json: a Hugging Face config.json with random weights and the byte tokenizer, to run
// real model shapes without their weights. The tensors are the table's rows the config has
// (layer_tensors.hpp), drawn in order: tensor k (0 the embedding, then each layer's rows in table order, a
// sparse layer's routed experts right after its router's, then the model's other rows) draws from seed
// f(dummy_seed, k), so a new row at the end of the table leaves every existing seed as it was; --dummy-dtype
// q8_0 marks the linear ones for a backend to keep quantized in Q8_0 blocks, --dummy-dtype mxfp4 makes the
// routed experts' gate, up and down MXFP4 blocks (as gpt-oss ships them; random_weights.hpp), --dummy-layers
// keeps the config's first layers. Scales give unit-variance activations: linear weights uniform with scale
// sqrt(3 / in_features) (MXFP4 experts: about the same rms), embeddings scale 1, norm weights
// 1 + uniform(0.1). Nothing is allocated: backends generate the values.
#include <cmath>

#include "engine/base/error.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/model/model_formats.hpp"
#include "engine/model/random_weights.hpp"
#include "engine/text/tokenizer_loaders.hpp"

namespace cbatch {
namespace {

constexpr std::string_view kPrefix = "dummy:";

std::string config_path(const ModelSource& source) {
  std::string_view path = source.path;
  if (path.substr(0, kPrefix.size()) == kPrefix) path.remove_prefix(kPrefix.size());
  if (path.empty())
    throw Error("'" + source.path + "': a dummy model needs a config path, dummy:CONFIG.json");
  return std::string(path);
}

class RandomTensors {
 public:
  // --dummy-dtype: mxfp4 keeps the other linear weights in fp32
  RandomTensors(uint64_t dummy_seed, DType dummy_dtype)
      : base_seed_(splitmix64(dummy_seed)),
        linear_dtype_(dummy_dtype == DType::kMXFP4 ? DType::kF32 : dummy_dtype),
        expert_dtype_(dummy_dtype) {}

  TensorView make(std::string name, int64_t rows, int64_t cols, float scale, float offset) {
    TensorView v;
    v.name = std::move(name);
    v.rows = rows;
    v.cols = cols;
    v.is_random = true;
    v.random = {splitmix64(base_seed_ + next_index_++), scale, offset};
    return v;
  }
  TensorView linear(std::string name, int64_t out_features, int64_t in_features) {
    TensorView v = make(std::move(name), out_features, in_features,
                        std::sqrt(3.0f / static_cast<float>(in_features)), 0.0f);
    v.dtype = linear_dtype_;
    return v;
  }
  // A routed expert's gate, up or down weight.
  TensorView expert(std::string name, int64_t out_features, int64_t in_features) {
    TensorView v = linear(std::move(name), out_features, in_features);
    v.dtype = expert_dtype_;
    return v;
  }
  // Norm weights multiply by about 1 whatever the family's offset (Gemma's (1 + w) gets w near 0).
  TensorView norm(std::string name, int64_t dim, float norm_offset) {
    return make(std::move(name), 1, dim, 0.1f, 1.0f - norm_offset);
  }
  TensorView bias(std::string name, int64_t dim) { return make(std::move(name), 1, dim, 0.1f, 0.0f); }

 private:
  uint64_t base_seed_;
  DType linear_dtype_;  // the block type a backend keeps linear weights in, or kF32
  DType expert_dtype_;  // the same for routed experts; kMXFP4: generated as MXFP4 blocks
  uint64_t next_index_ = 0;
};

// A row's tensor, drawn as its role says: projections, routers, the shared expert (and its gate) and the
// heads as linear weights of the row's input features, routed experts in --dummy-dtype, norms near 1.
TensorView draw(RandomTensors& r, std::string name, Role role, Shape shape, const ModelConfig& c, int layer = -1) {
  const int64_t rows = size_of(shape.rows, c, layer), cols = size_of(shape.cols, c, layer);
  switch (role) {
    case Role::kEmbedding: return r.make(std::move(name), rows, cols, 1.0f, 0.0f);
    case Role::kNorm: return r.norm(std::move(name), cols, c.norm_offset);
    case Role::kBias: return r.bias(std::move(name), cols);
    case Role::kDecay: return r.bias(std::move(name), cols);  // A_log near 0: A near -1
    case Role::kPlainNorm: return r.norm(std::move(name), cols, 0.0f);
    case Role::kRoutedExpert: return r.expert(std::move(name), rows, cols);
    default: return r.linear(std::move(name), rows, cols);
  }
}

// A sparse layer's routed experts, each one's rows in table order.
void draw_experts(RandomTensors& r, const ModelConfig& c, const std::string& p, LayerTensors& l) {
  l.experts.resize(static_cast<size_t>(c.num_experts));
  for (int e = 0; e < c.num_experts; ++e) {
    for (const ExpertTensorRow& row : expert_tensor_rows()) {
      if (!row.present(c)) continue;
      l.experts[static_cast<size_t>(e)][row.kind] = draw(r, p + expert_name(row.hf[0], e), row.role, row.shape, c);
    }
  }
}

// A layer's rows in table order (the routed experts right after the router's), named as Hugging Face does.
LayerTensors draw_layer(RandomTensors& r, const ModelConfig& c, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  LayerTensors l;
  for (const LayerTensorRow& row : layer_tensor_rows()) {
    const std::string_view name = row.hf[0].empty() ? row.bert : row.hf[0];  // an encoder's rows: BERT's names
    if (row.present(c, layer)) l[row.kind] = draw(r, p + std::string(name), row.role, row.shape, c, layer);
    if (row.kind == LayerTensor::kRouterBias && c.is_sparse(layer)) draw_experts(r, c, p, l);
  }
  return l;
}

// The embedding, the layers, then the model's other rows (a tied lm_head is the embedding).
ModelTensors make_tensors(const ModelConfig& c, const ModelSource& source) {
  RandomTensors r(source.dummy_seed, source.dummy_dtype);
  ModelTensors t;
  auto draw_model_row = [&](const ModelTensorRow& row) {
    const HfName& hf = row.hf.name.empty() ? row.bert : row.hf;  // an encoder's rows: BERT's names
    const std::string name = (hf.at_root ? "" : "model.") + std::string(hf.name);
    const bool tied = row.kind == ModelTensor::kLmHead && c.tied_embeddings;
    t[row.kind] = tied ? t[ModelTensor::kEmbedding] : draw(r, name, row.role, row.shape, c);
  };
  draw_model_row(model_row(ModelTensor::kEmbedding));
  for (int i = 0; i < c.num_layers; ++i) t.layers.push_back(draw_layer(r, c, i));
  for (const ModelTensorRow& row : model_tensor_rows()) {
    if (row.kind != ModelTensor::kEmbedding && row.present(c)) draw_model_row(row);
  }
  return t;
}

// The config's first dummy_layers layers (a quick run of a large shape).
ModelConfig keep_layers(ModelConfig c, const ModelSource& source) {
  const int n = source.dummy_layers;
  if (n == 0) return c;
  if (n < 0 || n > c.num_layers) {
    throw Error("--dummy-layers " + std::to_string(n) + ": '" + source.path + "' has " + std::to_string(c.num_layers) +
                " layers");
  }
  c.num_layers = n;
  if (!c.layer_window.empty()) c.layer_window.resize(static_cast<size_t>(n));
  if (!c.layer_sparse.empty()) c.layer_sparse.resize(static_cast<size_t>(n));
  if (!c.layer_nope.empty()) c.layer_nope.resize(static_cast<size_t>(n));
  return c;
}

// --dummy-dtype mxfp4 makes routed experts of 32-element blocks along their input features.
void check_mxfp4_experts(const ModelConfig& c, const ModelSource& source) {
  if (source.dummy_dtype != DType::kMXFP4) return;
  if (!c.is_moe()) {
    throw Error("--dummy-dtype mxfp4: '" + source.path + "' has no experts (mxfp4 applies to routed expert weights)");
  }
  for (int in_features : {c.dim, c.expert_hidden_dim}) {
    if (in_features % 32 == 0) continue;
    throw Error("--dummy-dtype mxfp4: '" + source.path + "' has experts with " + std::to_string(in_features) +
                " input features, not a multiple of the 32 of an MXFP4 block");
  }
}

}  // namespace

Model load_dummy_model(const ModelSource& source) {
  const HfConfig hf = read_hf_config(config_path(source));
  Model model;
  model.path = source.path;
  model.format = "dummy";
  model.weight_dtype = "random";
  if (source.dummy_dtype != DType::kF32) model.weight_dtype.append(" ").append(dtype_name(source.dummy_dtype));
  model.config = keep_layers(hf.config, source);
  check_mxfp4_experts(model.config, source);
  model.tensors = make_tensors(model.config, source);
  model.tokenizer = make_byte_tokenizer(hf.config.vocab_size, hf.bos_id, hf.eos_ids);
  return model;
}

std::unique_ptr<Tokenizer> load_dummy_model_tokenizer(const ModelSource& source) {
  const HfConfig hf = read_hf_config(config_path(source));
  return make_byte_tokenizer(hf.config.vocab_size, hf.bos_id, hf.eos_ids);
}

}  // namespace cbatch
