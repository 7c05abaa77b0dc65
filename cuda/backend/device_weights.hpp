// The model's weights on the device, in the compute dtype T (norm weights, biases and RoPE frequencies
// fp32; norm weights with the family's norm_offset added, as the CPU backend adds it), built by one loop
// over the tensor table's rows and read by kind. Q, K, V are fused into one (q_dim + 2 kv_dim, dim) matrix
// (their biases likewise) and gate, up into one (2 hidden, dim) matrix, so each needs one GEMM (the table's
// `joins`). A tied lm_head is the embedding buffer itself. The family's optional tensors are empty buffers
// where the model has none. With fp8 weights the four linear weights of each layer are FP8 E4M3 with one
// scale each (linear.hpp); the embedding and lm_head stay in T, as in vLLM. With weights=blocks they stay in
// the blocks of the model's tensors where the block GEMM reads them (linear_blocks.hpp).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "cuda/common/device_buffer.hpp"
#include "cuda/gemm/linear.hpp"
#include "cuda/moe/moe_quant_gemm.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// A layer's weights by kind of the tensor table (layer_tensors.hpp), each product under its first row's
// kind. A sparse layer has its router, routed experts (every expert's matrix stacked in one buffer per
// product, so that expert e's is at e * its size) and shared expert instead of the dense gate|up and down.
// The experts stay quantized where moe_quant_gemm multiplies them (T bf16 or fp16): in MXFP4 or Q8_0 blocks
// where the model ships them so, in FP8 with a scale per row with fp8 weights; else (other GGUF blocks
// decoded at load like the dense weights, fp32, --cuda-kernel moe-experts=dequant) in T.
template <typename T>
struct LayerWeights {
  // kQkv (q_dim + 2 * kv_dim, dim): rows of wq, then wk, then wv; kWo (dim, q_dim); kGateUp (2 * hidden_dim,
  // dim): rows of w_gate, then w_up; kDown (dim, hidden_dim). A sparse layer's kRouter (num_experts, dim),
  // kSharedGateUp (2 * shared_hidden, dim) and kSharedDown (dim, shared_hidden), in T (never FP8). Empty
  // where the layer has none.
  ByKind<LayerTensor, LinearWeight<T>> linear;
  // fp32 (n): norms with the norm offset added, biases (kQkvBias: bq, bk, bv), sinks (num_heads), the shared
  // expert's sigmoid gate (dim); empty where the layer has none.
  ByKind<LayerTensor, DeviceBuffer<float>> vectors;
  // kGateUp (num_experts, 2 * expert_hidden, dim): each expert's gate rows, then up; kDown (num_experts, dim,
  // expert_hidden).
  ByKind<ExpertTensor, ExpertMatrix<T>> experts;
  // gpt-oss's expert biases (ModelConfig::expert_bias), fp32: kGateUpBias (num_experts, 2 * expert_hidden)
  // [gate | up], kDownBias (num_experts, dim); empty without them.
  ByKind<ExpertTensor, DeviceBuffer<float>> expert_vectors;

  const float* vector(LayerTensor kind) const { return vectors[kind].get(); }  // null when absent
  // A shared expert beside the routed ones (its gate vector may be absent: Granite's is unscaled).
  bool has_shared() const { return linear[LayerProduct::kSharedGateUp].bytes() > 0; }
  size_t bytes() const;
};

// Which RoPE table a row of a layer uses: the layer's base (local: Gemma 3's windowed layers) and, for
// longrope, whether the row's position is at or past original_max_position.
enum RopeTable : int { kRopeGlobal = 0, kRopeLocal = 1, kRopeLongRange = 2, kNumRopeTables = 4 };

template <typename T>
struct DeviceWeights {
  // kEmbedding (vocab, dim); kLmHead (vocab, dim), empty when the lm_head is tied to the embedding.
  ByKind<ModelTensor, DeviceBuffer<T>> tables;
  ByKind<ModelTensor, DeviceBuffer<float>> vectors;  // kFinalNorm (dim), the norm offset added
  std::vector<LayerWeights<T>> layers;
  std::vector<std::string> notes;  // for the load line: which linear weights stay in their blocks (linear_blocks.hpp)
  DeviceBuffer<float> rope_inv_freq;  // (kNumRopeTables, max_head_dim / 2) from rope_inv_freq(config, .., local, long)

  const T* embedding() const { return tables[ModelTensor::kEmbedding].get(); }
  const T* lm_head() const {
    const DeviceBuffer<T>& untied = tables[ModelTensor::kLmHead];
    return untied.size() > 0 ? untied.get() : embedding();
  }
  const float* final_norm() const { return vectors[ModelTensor::kFinalNorm].get(); }
  // Table `set` (RopeTable bits) of rope_inv_freq; every set is filled, a model reads those it uses.
  const float* rope_table(int set) const {
    return rope_inv_freq.get() + static_cast<size_t>(set) * (rope_inv_freq.size() / kNumRopeTables);
  }
  size_t bytes() const;
  size_t max_block_elems() const;   // out * in of the largest linear weight in blocks; 0 when none is
  int64_t max_block_out() const;    // the most outputs of a linear weight in blocks; 0 when none is
};

// Converts and uploads every tensor (host tensors in bounded chunks through fp32, random tensors
// generated on the device). Checks each tensor's shape against the config; throws cbatch::Error.
// Returns after the stream is idle. fp8_weights: the layers' linear weights quantized to FP8 (T bf16 or
// fp16), the experts to FP8 with a scale per row; a weight whose shape cuBLASLt's FP8 GEMM (an expert's:
// moe_quant_gemm, k a multiple of 32) cannot take, or that holds a NaN or an infinity, is refused with its
// tensor's name. keep_quantized = false (--cuda-kernel moe-experts=dequant) keeps every expert in T (the
// cuBLAS path, to compare). linear_blocks (--cuda-kernel weights=blocks, T bf16 or fp16, without fp8 weights):
// the layers' projections stay in the model's blocks where linear_blocks_choice says so, the others in T.
template <typename T>
DeviceWeights<T> upload_weights(const Model& model, cudaStream_t stream, bool fp8_weights = false,
                                bool keep_quantized = true, bool linear_blocks = false);

}  // namespace cbatch
