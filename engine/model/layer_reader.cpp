// A layer's rows from a model file by name (layer_reader.hpp): fused products first, then the rows the
// config wants, then the others the file has.
#include "engine/model/layer_reader.hpp"

#include <set>

#include "engine/base/error.hpp"
#include "engine/model/model_checks.hpp"

namespace cbatch {
namespace {

class LayerRead {
 public:
  LayerRead(const TensorFile& file, Dialect dialect, const std::string& prefix, const ModelConfig& c, int layer)
      : file_(file), dialect_(dialect), prefix_(prefix), config_(c), layer_(layer) {}

  LayerTensors read() {
    for (const FusedTensorRow& fused : fused_tensor_rows()) read_fused(fused);
    for (const LayerTensorRow& row : layer_tensor_rows()) {
      if (row.present(config_, layer_)) read_wanted(row);
    }
    for (const LayerTensorRow& row : layer_tensor_rows()) {
      if (!row.present(config_, layer_)) read_unwanted(row);
    }
    return std::move(tensors_);
  }

 private:
  // The first of the names the file has that no row took; "" when none.
  std::string free_name(const Spellings& names) const {
    for (std::string_view n : names) {
      const std::string name = prefix_ + std::string(n);
      if (!n.empty() && taken_.count(name) == 0 && file_.has(name)) return name;
    }
    return "";
  }

  TensorView take(const std::string& name) {
    taken_.insert(name);
    return file_.view(name);
  }

  void read_wanted(const LayerTensorRow& row) {
    TensorView& view = tensors_[row.kind];
    if (!view.empty()) return;  // a part of a fused product
    const Spellings names = layer_spellings(row, dialect_);
    if (names[0].empty()) {
      throw Error("'" + file_.path() + "': the architecture has a " + std::string(row.label) +
                  " tensor, which this format has no name for");
    }
    const std::string name = free_name(names);
    if (name.empty()) missing(names);
    view = as_shaped(row, take(name));
  }

  // A tensor of a row the architecture lacks, kept for the shape checks to name; except a shared-K/V layer's
  // k/v projections and k norm, which checkpoints may still hold and nothing reads (transformers ignores them).
  void read_unwanted(const LayerTensorRow& row) {
    const bool shared_kv = row.kind == LayerTensor::kWk || row.kind == LayerTensor::kWv || row.kind == LayerTensor::kKNorm;
    if (shared_kv && !config_.writes_kv(layer_)) return;
    const std::string name = free_name(layer_spellings(row, dialect_));
    if (!name.empty()) tensors_[row.kind] = as_shaped(row, take(name));
  }

  // A vector row's tensor as the (1, n) vector it is, however the file shapes its values (llama.cpp keeps
  // a Mamba-2 layer's A and D as (heads, 1), its gated norm as (groups, inner / groups)).
  static TensorView as_shaped(const LayerTensorRow& row, TensorView view) {
    if (row.shape.rows == Size::kOne && view.rows > 1) {
      view.cols *= view.rows;
      view.rows = 1;
    }
    return view;
  }

  [[noreturn]] void missing(const Spellings& names) const {
    std::string others;
    for (size_t i = 1; i < names.size() && !names[i].empty(); ++i) {
      others += (others.empty() ? " (or '" : "', '") + prefix_ + std::string(names[i]);
    }
    if (others.empty()) file_.view(prefix_ + std::string(names[0]));  // the file's own message
    throw Error("'" + file_.path() + "': tensor '" + prefix_ + std::string(names[0]) + "'" + others +
                "') is missing");
  }

  // A product the file stores as one tensor when its first wanted row's own tensor is not there: the
  // wanted rows as row slices of it, in table order.
  void read_fused(const FusedTensorRow& fused) {
    const std::string_view stored = dialect_ == Dialect::kGguf ? fused.gguf : dialect_ == Dialect::kHf ? fused.hf : "";
    if (stored.empty() || !file_.has(prefix_ + std::string(stored))) return;
    std::vector<const LayerTensorRow*> parts;
    int64_t rows = 0;
    for (const LayerTensorRow& row : layer_tensor_rows()) {
      if (row.joins != fused.product || !row.present(config_, layer_)) continue;
      parts.push_back(&row);
      rows += size_of(row.shape.rows, config_, layer_);
    }
    if (parts.empty() || free_name(layer_spellings(*parts.front(), dialect_)) != "") return;
    const std::string name = prefix_ + std::string(stored);
    const TensorView all = take(name);
    std::string labels;
    for (const LayerTensorRow* row : parts) labels += (labels.empty() ? "" : ", ") + std::string(row->label);
    if (all.rows != rows) {
      throw Error("'" + file_.path() + "': tensor '" + name + "' has " + std::to_string(all.rows) + " rows; as the " +
                  "fused " + labels + " (their own tensors are not there) it needs " + std::to_string(rows));
    }
    int64_t first = 0;
    for (const LayerTensorRow* row : parts) {
      const int64_t n = size_of(row->shape.rows, config_, layer_);
      tensors_[row->kind] = row_slice(all, first, n);
      first += n;
    }
  }

  const TensorFile& file_;
  Dialect dialect_;
  const std::string& prefix_;
  const ModelConfig& config_;
  int layer_;
  std::set<std::string> taken_;
  LayerTensors tensors_;
};

}  // namespace

Spellings layer_spellings(const LayerTensorRow& row, Dialect dialect) {
  switch (dialect) {
    case Dialect::kGguf: return row.gguf;
    case Dialect::kHf: return row.hf;
    case Dialect::kBert: return {row.bert};
  }
  return {};
}

int spelling_in_file(const TensorFile& file, const std::string& prefix, const Spellings& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].empty() && file.has(prefix + std::string(names[i]))) return static_cast<int>(i);
  }
  return -1;
}

LayerTensors read_layer_rows(const TensorFile& file, Dialect dialect, const std::string& prefix,
                             const ModelConfig& config, int layer) {
  return LayerRead(file, dialect, prefix, config, layer).read();
}

}  // namespace cbatch
