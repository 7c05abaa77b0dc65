// A layer's rows of the tensor table read from a model file by name, the part the GGUF and Hugging Face
// loaders share: each format gives a TensorFile (has, view) and its dialect of names; the routed experts
// are each format's own (stacked or per expert).
#pragma once
#include <string>

#include "engine/model/layer_tensors.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// Which of a row's name columns a file uses.
enum class Dialect : uint8_t { kGguf, kHf, kBert };

// A model file's tensors by name.
class TensorFile {
 public:
  virtual ~TensorFile() = default;
  virtual bool has(const std::string& name) const = 0;
  // Throws cbatch::Error naming the tensor and the file when it is not there.
  virtual TensorView view(const std::string& name) const = 0;
  virtual std::string path() const = 0;  // for messages
};

// The row's spellings in the dialect (none: the format has no such tensor).
Spellings layer_spellings(const LayerTensorRow& row, Dialect dialect);

// The index of the first of `names` (under prefix) the file has; -1 when it has none.
int spelling_in_file(const TensorFile& file, const std::string& prefix, const Spellings& names);

// The rows of layer `layer` under `prefix`, experts aside: every row the config wants (throws naming the
// tensor and the file when the file lacks it), then every other row's tensor the file has, for the shape
// checks to refuse (validate_model_tensors). A name one row took is not another's (gpt-oss's GGUF FFN norm
// is post_attention_norm, Gemma's post_attention_norm the attention output's). A product stored fused
// (fused_tensor_rows) is split into its rows' views.
LayerTensors read_layer_rows(const TensorFile& file, Dialect dialect, const std::string& prefix,
                             const ModelConfig& config, int layer);

}  // namespace cbatch
