// A loaded model: its configuration, views of its weight tensors (into memory-mapped files held by
// `storage`, or buffers the loader made, held by the views themselves: TensorView::owner), and its
// tokenizer. Formats: GGUF, llama2.c .bin + tokenizer.bin, Hugging Face directories, and
// dummy:CONFIG.json (random weights with real shapes).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/base/embedding_params.hpp"
#include "engine/model/layer_tensors.hpp"
#include "engine/model/model_config.hpp"
#include "engine/model/tensor.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

// A model's weights by kind (the tensor table, layer_tensors.hpp): a view per row, empty for a row the model
// does not have. A sparse layer's routed experts are beside its rows (GGUF files stack them in 3-D tensors:
// these are views of each expert's part).
struct ExpertTensors : ByKind<ExpertTensor, TensorView> {};

struct LayerTensors : ByKind<LayerTensor, TensorView> {
  std::vector<ExpertTensors> experts;  // (num_experts) on a sparse layer (ModelConfig::is_sparse), else none
};

struct ModelTensors : ByKind<ModelTensor, TensorView> {
  std::vector<LayerTensors> layers;  // (num_layers); a tied lm_head is the embedding's view
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
  std::string quantization;        // a pre-quantized checkpoint's scheme, bits and groups (for inspect)
  ModelConfig config;
  ModelTensors tensors;            // empty once handed to a backend (take_tensors)
  bool tensors_taken = false;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string chat_template;       // Jinja text from the model files, empty if none
  EmbeddingSpec embedding;         // sentence-transformers pooling (Hugging Face directories)
  std::shared_ptr<const void> storage;  // keeps the mapped files alive
  // What the files hold that the loader leaves out on purpose (a vision tower, multi-token-prediction
  // layers), one sentence each, for the load line and inspect.
  std::vector<std::string> notes;
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

// Hands the model's weight views to a backend that makes its own copies of them (the CPU's panels, the CUDA
// upload): the model keeps none (tensors_taken), so a buffer the loader made (a pre-quantized checkpoint's
// blocks) is freed as soon as the backend drops its last view of it, and nothing can read it afterwards;
// a second backend or any later reader of model.tensors is refused (expect_tensors).
ModelTensors take_tensors(Model& model);

// Throws an internal error once the model's tensors were taken (take_tensors).
const ModelTensors& expect_tensors(const Model& model);

}  // namespace cbatch
