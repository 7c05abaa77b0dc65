// The CPU backend's weights, built from the tensor table (layer_tensors.hpp) by one loop over its rows: a
// product (a row and the rows that join it: q|k|v, gate|up) is a packed matrix (cpu_pack.hpp) and a vector
// (norm weights with the family's norm_offset added, biases, sinks) fp32, each kept under the kind of its
// first row; a sparse layer's routed experts likewise, per expert. Tables looked up by rows (the embedding,
// the encoders' position and token type tables) stay as stored and are converted a row at a time.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_pack.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

class ThreadPool;

struct CpuExpert {
  ByKind<ExpertTensor, PackedMatrix> matrices;  // kGateUp (2 * expert_hidden, dim) [gate | up], kDown (dim, expert_hidden)
  ByKind<ExpertTensor, std::vector<float>> vectors;  // kGateUpBias (2 * expert_hidden), kDownBias (dim); or empty

  const PackedMatrix& matrix(ExpertTensor kind) const { return matrices[kind]; }
  const std::vector<float>& vector(ExpertTensor kind) const { return vectors[kind]; }
};

struct CpuLayer {
  // kQkv (q_proj_dim + 2 * kv_dim, dim), kWo (dim, q_dim), kGateUp (2 * hidden, dim) or a plain FFN's up
  // (hidden, dim), kDown (dim, hidden), kRouter (num_experts, dim), kSharedGateUp (2 * shared_hidden, dim),
  // kSharedDown (dim, shared_hidden); empty where the layer has none.
  ByKind<LayerTensor, PackedMatrix> matrices;
  // A DeltaNet layer's kSsmQkvz (conv_dim + value_dim, dim), kSsmBa (2 * num_v_heads, dim), kSsmOut (dim,
  // value_dim).
  // (n) each: norms, biases (kQkvBias: q_dim + 2 * kv_dim), sinks (num_heads), the shared expert's gate
  // (dim), a DeltaNet's conv taps kSsmConv (conv_dim, conv_kernel) row-major, kSsmDtBias and kSsmDecay (A,
  // num_v_heads), kSsmNorm (v_head_dim); empty where the layer has none.
  ByKind<LayerTensor, std::vector<float>> vectors;
  std::vector<CpuExpert> experts;  // (num_experts) on a sparse layer

  const PackedMatrix& matrix(LayerTensor kind) const { return matrices[kind]; }
  const std::vector<float>& vector(LayerTensor kind) const { return vectors[kind]; }
};

struct CpuWeights {
  std::vector<CpuLayer> layers;
  // kEmbedding (vocab, dim), kPositionEmbedding (positions, dim), kTokenTypeEmbedding (types, dim) as
  // stored (mapped file, owned buffer or random): never an fp32 copy of the whole table.
  ByKind<ModelTensor, TensorView> tables;
  // kFinalNorm, kEmbeddingNorm (dim) and its bias; a cross-encoder's kPooler (dim, dim), kClassifier
  // (num_labels, dim) row-major, and their biases; empty where the model has none.
  ByKind<ModelTensor, std::vector<float>> vectors;
  ByKind<ModelTensor, PackedMatrix> matrices;  // kLmHead (vocab, dim), a packed copy of the embedding when tied
  int64_t matrix_bytes = 0;   // memory of the packed matrices, routed experts aside
  int64_t matrix_params = 0;  // their parameters
  double expert_bytes = 0;    // the routed experts' bytes as stored (not the panels' memory)
  int64_t expert_matrix_bytes = 0;  // memory of the routed experts' packed matrices
  double expert_params = 0;   // their parameters
};

// Every row the model has, kept as its role says (Role): products packed with `packing` (routers without
// the 8-bit product: a flipped choice would change the output far more), vectors in fp32. Each layer's views
// are dropped once it is packed (a view holds the buffer the loader made for it: TensorView::owner), so the
// loader's blocks of a pre-quantized checkpoint and the panels made of them are not all in memory at once.
CpuWeights load_cpu_weights(const ModelConfig& config, ModelTensors tensors, Packing packing, ThreadPool& pool);

}  // namespace cbatch
