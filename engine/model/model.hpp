// A loaded model: its configuration, views of its weight tensors (into memory-mapped files or owned
// buffers held by `storage`), and its tokenizer. Formats: GGUF, llama2.c .bin + tokenizer.bin,
// Hugging Face directories, and dummy:CONFIG.json (random weights with real shapes).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/base/embedding_params.hpp"
#include "engine/model/model_config.hpp"
#include "engine/model/tensor.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

// One expert's gated FFN (a view of its part of a stacked 3-D tensor in GGUF files); biases only where
// ModelConfig::expert_bias (empty views otherwise).
struct ExpertTensors {
  TensorView gate;       // (width, dim)
  TensorView up;         // (width, dim)
  TensorView down;       // (dim, width)
  TensorView gate_bias;  // (1, width)
  TensorView up_bias;    // (1, width)
  TensorView down_bias;  // (1, dim)
};

struct LayerTensors {
  TensorView attn_norm;  // (1, dim)
  TensorView wq;         // (num_heads * head_dim, dim)
  TensorView wk;         // (num_kv_heads * head_dim, dim)
  TensorView wv;         // (num_kv_heads * head_dim, dim)
  TensorView wo;         // (dim, num_heads * head_dim)
  TensorView ffn_norm;   // (1, dim)
  TensorView w_gate;     // (hidden_dim, dim)   dense layers with gated_ffn only
  TensorView w_up;       // (hidden_dim, dim)   dense layers only
  TensorView w_down;     // (dim, hidden_dim)   dense layers only
  // Present only where the family has them (ModelConfig says which); empty views otherwise.
  TensorView bq;              // (1, num_heads * head_dim)     qkv_bias
  TensorView bk;              // (1, num_kv_heads * head_dim)  qkv_bias
  TensorView bv;              // (1, num_kv_heads * head_dim)  qkv_bias
  TensorView q_norm;          // (1, head_dim)                 qk_norm; (1, q_dim) with qk_norm_whole
  TensorView k_norm;          // (1, head_dim)                 qk_norm; (1, kv_dim) with qk_norm_whole
  TensorView post_attn_norm;  // (1, dim)                      sandwich_norms
  TensorView post_ffn_norm;   // (1, dim)                      sandwich_norms
  TensorView attn_norm_bias;  // (1, dim)                      layer_norm
  TensorView ffn_norm_bias;   // (1, dim)                      layer_norm
  TensorView bo;              // (1, dim)                      o_bias
  TensorView b_up;            // (1, hidden_dim)               !gated_ffn
  TensorView b_down;          // (1, dim)                      !gated_ffn
  TensorView sinks;           // (1, num_heads)                attn_sinks
  // Sparse layers (ModelConfig::is_sparse) instead of w_gate, w_up, w_down:
  TensorView router;                  // (num_experts, dim)
  TensorView router_bias;             // (1, num_experts), when ModelConfig::router_bias
  std::vector<ExpertTensors> experts;  // (num_experts), each of width expert_hidden_dim
  ExpertTensors shared_expert;        // of width shared_expert_hidden_dim, when the model has one
  TensorView shared_expert_gate;      // (1, dim), when the model has a shared expert
};

struct ModelTensors {
  TensorView embedding;            // (vocab, dim)
  std::vector<LayerTensors> layers;
  TensorView final_norm;           // (1, dim); empty with post_norm (each layer ends normed)
  TensorView lm_head;              // (vocab, dim); the same view as embedding when tied; empty for an encoder
  // Encoders: absolute positions, token types and the norm of the summed embeddings (empty otherwise).
  TensorView position_embedding;   // (max_context + position_offset, dim)  learned_positions
  TensorView token_type_embedding;  // (type_vocab_size, dim)            token_types
  TensorView embedding_norm;       // (1, dim)                            post_norm
  TensorView embedding_norm_bias;  // (1, dim)                            post_norm with layer_norm
  // The sequence-classification head (ModelConfig::num_labels > 0; empty otherwise).
  TensorView pooler;               // (dim, dim)        dense, then tanh, on the [CLS] row
  TensorView pooler_bias;          // (1, dim)
  TensorView classifier;           // (num_labels, dim)
  TensorView classifier_bias;      // (1, num_labels)
};

// How the model's hidden states become a sentence embedding, from a sentence-transformers directory
// (modules.json, 1_Pooling/config.json, Normalize, sentence_bert_config.json); has_pooling false without.
struct EmbeddingSpec {
  bool has_pooling = false;
  Pooling pooling = Pooling::kMean;
  bool normalize = false;          // a Normalize module follows the pooling
  int max_seq_length = 0;          // tokens an input is truncated to (0: the model's context)
  bool matryoshka = false;         // config.json says the leading dimensions are an embedding themselves
};

struct Model {
  std::string path;
  std::string format;              // "gguf", "llama2c", "hf" or "dummy"
  std::string weight_dtype;        // as stored: "f32", "q4_1", "bf16", "random", ... (for inspect)
  ModelConfig config;
  ModelTensors tensors;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string chat_template;       // Jinja text from the model files, empty if none
  EmbeddingSpec embedding;         // sentence-transformers pooling (Hugging Face directories)
  std::shared_ptr<const void> storage;  // keeps the mapped files and owned buffers alive
};

struct ModelSource {
  std::string path;                // file, directory, or "dummy:CONFIG.json"
  std::string tokenizer_path;      // llama2.c tokenizer.bin (needed for .bin models)
  uint64_t dummy_seed = 0;         // seed of dummy weights
  DType dummy_dtype = DType::kF32;  // dummy linear weights: fp32, Q8_0 blocks (CPU), or MXFP4 experts
  int dummy_layers = 0;            // dummy: the first N layers of the config only; 0 = all
};

// Throws cbatch::Error naming the file and the problem.
Model load_model(const ModelSource& source);

// Only the tokenizer of a model (a vocab-only GGUF is enough), for `cbatch tokenize`; *chat_template
// (when given) receives the model's chat template text, "" if it has none.
std::unique_ptr<Tokenizer> load_tokenizer(const ModelSource& source, std::string* chat_template = nullptr);

// Checks shapes of every tensor against the config (throws cbatch::Error naming the tensor).
void validate_model_tensors(const Model& model);

}  // namespace cbatch
