// The tensor table and the layer reader the GGUF and Hugging Face loaders share: products are led by their
// first row, the parameter count is the rows', and a layer read from a file by the table's names takes each
// wanted row (alternates included, a name one row took not another's), reads the others the file has for
// the shape checks to refuse, splits fused products, and names the tensor and the file when one is missing
// or does not fit.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/error.hpp"
#include "engine/model/layer_reader.hpp"
#include "engine/model/layer_tensors.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;

// F32 tensors by name (zeros), as a model file would hold them.
class MapFile final : public TensorFile {
 public:
  void add(const std::string& name, int64_t rows, int64_t cols) {
    auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(rows * cols));
    TensorView& v = views_[name];
    v.name = name;
    v.rows = rows;
    v.cols = cols;
    v.data = values->data();
    buffers_.push_back(std::move(values));
  }
  bool has(const std::string& name) const override { return views_.count(name) != 0; }
  TensorView view(const std::string& name) const override {
    if (!has(name)) throw Error("'model.file': tensor '" + name + "' is missing");
    return views_.at(name);
  }
  std::string path() const override { return "model.file"; }

 private:
  std::map<std::string, TensorView> views_;
  std::vector<std::shared_ptr<std::vector<float>>> buffers_;
};

ModelConfig small_config() {
  ModelConfig c;
  c.dim = 8;
  c.hidden_dim = 12;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.vocab_size = 16;
  c.max_context = 32;
  return c;
}

// Every wanted row of a layer of c (shapes from the table), under the dialect's first spelling, except
// the kinds in `leave_out`.
MapFile layer_file(const ModelConfig& c, Dialect dialect, const std::string& p,
                   std::initializer_list<LayerTensor> leave_out = {}) {
  MapFile file;
  for (const LayerTensorRow& row : layer_tensor_rows()) {
    if (!row.present(c, 0) || std::find(leave_out.begin(), leave_out.end(), row.kind) != leave_out.end()) continue;
    file.add(p + std::string(layer_spellings(row, dialect)[0]), size_of(row.shape.rows, c), size_of(row.shape.cols, c));
  }
  return file;
}

}  // namespace

TEST_CASE("tensor table: each product is led by its first row, and every row has a name in some format") {
  for (const LayerTensorRow& row : layer_tensor_rows()) {
    CAPTURE(row.label);
    CHECK(layer_row(row.joins).joins == row.joins);
    CHECK(static_cast<int>(row.joins) <= static_cast<int>(row.kind));
    CHECK((!row.gguf[0].empty() || !row.hf[0].empty() || !row.bert.empty()));
  }
  for (const ExpertTensorRow& row : expert_tensor_rows()) {
    CHECK(expert_row(row.joins).joins == row.joins);
    CHECK(!row.hf_stacked.empty());
  }
  CHECK(expert_name("mlp.experts.{e}.up_proj.weight", 12) == "mlp.experts.12.up_proj.weight");
}

TEST_CASE("tensor table: the parameter count is the rows'") {
  ModelConfig c = small_config();
  // Per layer: 2 norms (16), q and o (2 * 64), k and v (2 * 32), the gated FFN (3 * 96).
  CHECK(c.layer_parameters() == 16 + 128 + 64 + 288);
  c.tied_embeddings = true;
  CHECK(c.num_parameters() == c.layer_parameters() + 8 + 16 * 8);  // final norm, embedding (the tied head)
  c.qkv_bias = c.o_bias = true;
  CHECK(c.layer_parameters() == 16 + 128 + 64 + 288 + (8 + 4 + 4) + 8);
}

TEST_CASE("layer reader: Gemma's and Llama's Hugging Face FFN norms, gpt-oss's GGUF one") {
  ModelConfig gemma = small_config();
  gemma.sandwich_norms = true;
  const std::string p = "model.layers.0.";
  MapFile gemma_file = layer_file(gemma, Dialect::kHf, p, {LayerTensor::kPostAttnNorm});
  gemma_file.add(p + "post_attention_layernorm.weight", 1, 8);
  const LayerTensors g = read_layer_rows(gemma_file, Dialect::kHf, p, gemma, 0);
  CHECK(g[LayerTensor::kFfnNorm].name == p + "pre_feedforward_layernorm.weight");
  CHECK(g[LayerTensor::kPostAttnNorm].name == p + "post_attention_layernorm.weight");

  const ModelConfig llama = small_config();
  MapFile llama_file = layer_file(llama, Dialect::kHf, p, {LayerTensor::kFfnNorm});
  llama_file.add(p + "post_attention_layernorm.weight", 1, 8);
  const LayerTensors l = read_layer_rows(llama_file, Dialect::kHf, p, llama, 0);
  CHECK(l[LayerTensor::kFfnNorm].name == p + "post_attention_layernorm.weight");
  CHECK(l[LayerTensor::kPostAttnNorm].empty());  // the name is the FFN norm's

  MapFile oss_file = layer_file(llama, Dialect::kGguf, "blk.0.", {LayerTensor::kFfnNorm});
  oss_file.add("blk.0.post_attention_norm.weight", 1, 8);
  const LayerTensors o = read_layer_rows(oss_file, Dialect::kGguf, "blk.0.", llama, 0);
  CHECK(o[LayerTensor::kFfnNorm].name == "blk.0.post_attention_norm.weight");
  CHECK(o[LayerTensor::kPostAttnNorm].empty());
  CHECK(error_of([&] { read_layer_rows(MapFile(), Dialect::kHf, p, llama, 0); })
            .find("'model.file': tensor 'model.layers.0.input_layernorm.weight' (or "
                  "'model.layers.0.operator_norm.weight', 'model.layers.0.norm.weight') is missing") != std::string::npos);
  CHECK(error_of([&] { read_layer_rows(layer_file(llama, Dialect::kHf, p, {LayerTensor::kFfnNorm}), Dialect::kHf, p,
                                       llama, 0); })
            .find("tensor 'model.layers.0.pre_feedforward_layernorm.weight' (or "
                  "'model.layers.0.post_attention_layernorm.weight', 'model.layers.0.ffn_norm.weight', "
                  "'model.layers.0.norm.weight') is missing") != std::string::npos);
}

TEST_CASE("layer reader: a tensor the family lacks is read for the checks to refuse; fused products split") {
  const ModelConfig c = small_config();
  const std::string p = "blk.0.";
  MapFile extra = layer_file(c, Dialect::kGguf, p);
  extra.add(p + "attn_q.bias", 1, 8);
  CHECK(read_layer_rows(extra, Dialect::kGguf, p, c, 0)[LayerTensor::kBq].name == p + "attn_q.bias");

  MapFile fused = layer_file(c, Dialect::kGguf, p, {LayerTensor::kWq, LayerTensor::kWk, LayerTensor::kWv,
                                                    LayerTensor::kGate, LayerTensor::kUp});
  fused.add(p + "attn_qkv.weight", 8 + 4 + 4, 8);
  fused.add(p + "ffn_up.weight", 2 * 12, 8);
  const LayerTensors l = read_layer_rows(fused, Dialect::kGguf, p, c, 0);
  CHECK(l[LayerTensor::kWk].rows == 4);
  CHECK(static_cast<const uint8_t*>(l[LayerTensor::kWk].data) ==
        static_cast<const uint8_t*>(l[LayerTensor::kWq].data) + 8 * 8 * 4);  // rows 8..11 of the fused tensor
  CHECK(l[LayerTensor::kUp].rows == 12);
  MapFile short_qkv = layer_file(c, Dialect::kGguf, p, {LayerTensor::kWq, LayerTensor::kWk, LayerTensor::kWv});
  short_qkv.add(p + "attn_qkv.weight", 12, 8);
  const std::string message = error_of([&] { read_layer_rows(short_qkv, Dialect::kGguf, p, c, 0); });
  CHECK(message.find("'model.file': tensor 'blk.0.attn_qkv.weight' has 12 rows") != std::string::npos);
  CHECK(message.find("needs 16") != std::string::npos);
}

}  // namespace cbatch
