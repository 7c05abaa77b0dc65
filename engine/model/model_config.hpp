// The architecture facts of a Llama-family model, read from whichever file format it came in.
// Immutable after load; backends and the engine read it, nobody writes derived values back.
#pragma once
#include <cstdint>
#include <string>

namespace cbatch {

// Which pairs of a head's dimensions RoPE rotates together. llama2.c and GGUF rotate adjacent pairs
// (2i, 2i+1); Hugging Face checkpoints rotate halves (i, i + head_dim/2). A property of the weights.
enum class RopeLayout : uint8_t { kAdjacentPairs, kHalves };

struct RopeScaling {
  bool is_llama3 = false;          // rope_scaling.rope_type == "llama3"
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position = 8192;
};

struct ModelConfig {
  std::string architecture = "llama";
  int dim = 0;               // hidden size
  int hidden_dim = 0;        // FFN intermediate size
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;          // usually dim / num_heads
  int vocab_size = 0;
  int max_context = 0;       // positions the model supports (prompt + generated)
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  RopeLayout rope_layout = RopeLayout::kAdjacentPairs;
  bool tied_embeddings = false;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  int64_t num_parameters() const;   // weights incl. embeddings (lm_head counted once when tied)
};

// Inverse frequencies of RoPE (head_dim / 2 values), llama3 scaling applied when configured.
// Shared by every backend so that rotations agree bit for bit.
void rope_inv_freq(const ModelConfig& config, float* inv_freq);

}  // namespace cbatch
