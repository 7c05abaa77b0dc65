// A loaded model: its configuration, views of its weight tensors (into memory-mapped files or owned
// buffers held by `storage`), and its tokenizer. Formats: GGUF, llama2.c .bin + tokenizer.bin,
// Hugging Face directories, and dummy:CONFIG.json (random weights with real shapes).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model_config.hpp"
#include "engine/model/tensor.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

struct LayerTensors {
  TensorView attn_norm;  // (1, dim)
  TensorView wq;         // (num_heads * head_dim, dim)
  TensorView wk;         // (num_kv_heads * head_dim, dim)
  TensorView wv;         // (num_kv_heads * head_dim, dim)
  TensorView wo;         // (dim, num_heads * head_dim)
  TensorView ffn_norm;   // (1, dim)
  TensorView w_gate;     // (hidden_dim, dim)
  TensorView w_up;       // (hidden_dim, dim)
  TensorView w_down;     // (dim, hidden_dim)
  // Present only where the family has them (ModelConfig says which); empty views otherwise.
  TensorView bq;              // (1, num_heads * head_dim)     qkv_bias
  TensorView bk;              // (1, num_kv_heads * head_dim)  qkv_bias
  TensorView bv;              // (1, num_kv_heads * head_dim)  qkv_bias
  TensorView q_norm;          // (1, head_dim)                 qk_norm
  TensorView k_norm;          // (1, head_dim)                 qk_norm
  TensorView post_attn_norm;  // (1, dim)                      sandwich_norms
  TensorView post_ffn_norm;   // (1, dim)                      sandwich_norms
};

struct ModelTensors {
  TensorView embedding;            // (vocab, dim)
  std::vector<LayerTensors> layers;
  TensorView final_norm;           // (1, dim)
  TensorView lm_head;              // (vocab, dim); the same view as embedding when tied
};

struct Model {
  std::string path;
  std::string format;              // "gguf", "llama2c", "hf" or "dummy"
  std::string weight_dtype;        // as stored: "f32", "q4_1", "bf16", "random", ... (for inspect)
  ModelConfig config;
  ModelTensors tensors;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string chat_template;       // Jinja text from the model files, empty if none
  std::shared_ptr<const void> storage;  // keeps the mapped files and owned buffers alive
};

struct ModelSource {
  std::string path;                // file, directory, or "dummy:CONFIG.json"
  std::string tokenizer_path;      // llama2.c tokenizer.bin (needed for .bin models)
  uint64_t dummy_seed = 0;         // seed of dummy weights
};

// Throws cbatch::Error naming the file and the problem.
Model load_model(const ModelSource& source);

// Only the tokenizer of a model (a vocab-only GGUF is enough), for `cbatch tokenize`; *chat_template
// (when given) receives the model's chat template text, "" if it has none.
std::unique_ptr<Tokenizer> load_tokenizer(const ModelSource& source, std::string* chat_template = nullptr);

// Checks shapes of every tensor against the config (throws cbatch::Error naming the tensor).
void validate_model_tensors(const Model& model);

}  // namespace cbatch
