// A small random Llama model built in memory for engine and backend tests: random tensors (the same
// generator dummy models use), a GQA shape, either RoPE layout, and a trivial byte tokenizer.
#pragma once
#include <cmath>
#include <memory>
#include <string>

#include "engine/model/model.hpp"

namespace cbatch::testing {

class TestByteTokenizer final : public Tokenizer {
 public:
  explicit TestByteTokenizer(int vocab) : vocab_(vocab) {
    bos_id_ = 1;
    eos_ids_ = {2};
  }
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(bos_id_);
    for (unsigned char ch : text) ids.push_back(3 + ch % (vocab_ - 3));
    return ids;
  }
  std::string decode_piece(int32_t, int32_t id) const override {
    return id >= 3 ? std::string(1, static_cast<char>('a' + id % 26)) : std::string();
  }
  int vocab_size() const override { return vocab_; }
  std::string_view kind() const override { return "byte"; }

 private:
  int vocab_;
};

struct TestModelShape {
  int dim = 64, hidden = 96, layers = 2, heads = 4, kv_heads = 2, vocab = 300, context = 256;
  RopeLayout layout = RopeLayout::kHalves;
  bool tied = false;
  uint64_t seed = 1;
};

inline TensorView random_tensor(const std::string& name, int64_t rows, int64_t cols, uint64_t seed, float scale,
                                float offset = 0.0f) {
  TensorView t;
  t.name = name;
  t.rows = rows;
  t.cols = cols;
  t.is_random = true;
  t.random = {seed, scale, offset};
  return t;
}

inline Model make_test_model(const TestModelShape& s) {
  Model m;
  m.path = "test";
  m.format = "dummy";
  ModelConfig& c = m.config;
  c.dim = s.dim;
  c.hidden_dim = s.hidden;
  c.num_layers = s.layers;
  c.num_heads = s.heads;
  c.num_kv_heads = s.kv_heads;
  c.head_dim = s.dim / s.heads;
  c.vocab_size = s.vocab;
  c.max_context = s.context;
  c.rope_layout = s.layout;
  c.tied_embeddings = s.tied;
  uint64_t seed = s.seed * 1000;
  const float in_scale = 1.7f / std::sqrt(static_cast<float>(s.dim));
  m.tensors[ModelTensor::kEmbedding] = random_tensor("embedding", s.vocab, s.dim, seed++, 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    LayerTensors t;
    t[LayerTensor::kAttnNorm] = random_tensor("attn_norm", 1, s.dim, seed++, 0.1f, 1.0f);
    t[LayerTensor::kWq] = random_tensor("wq", c.q_dim(), s.dim, seed++, in_scale);
    t[LayerTensor::kWk] = random_tensor("wk", c.kv_dim(), s.dim, seed++, in_scale);
    t[LayerTensor::kWv] = random_tensor("wv", c.kv_dim(), s.dim, seed++, in_scale);
    t[LayerTensor::kWo] = random_tensor("wo", s.dim, c.q_dim(), seed++, in_scale);
    t[LayerTensor::kFfnNorm] = random_tensor("ffn_norm", 1, s.dim, seed++, 0.1f, 1.0f);
    t[LayerTensor::kGate] = random_tensor("w_gate", s.hidden, s.dim, seed++, in_scale);
    t[LayerTensor::kUp] = random_tensor("w_up", s.hidden, s.dim, seed++, in_scale);
    t[LayerTensor::kDown] = random_tensor("w_down", s.dim, s.hidden, seed++, 1.7f / std::sqrt(static_cast<float>(s.hidden)));
    m.tensors.layers.push_back(t);
  }
  m.tensors[ModelTensor::kFinalNorm] = random_tensor("final_norm", 1, s.dim, seed++, 0.1f, 1.0f);
  m.tensors[ModelTensor::kLmHead] = s.tied ? m.tensors[ModelTensor::kEmbedding] : random_tensor("lm_head", s.vocab, s.dim, seed++, in_scale);
  m.tokenizer = std::make_unique<TestByteTokenizer>(s.vocab);
  return m;
}

}  // namespace cbatch::testing
