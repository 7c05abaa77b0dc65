// Stacked Hugging Face experts to per-expert views (hf_stacked_experts.hpp): gpt-oss's, interleaved and
// transposed, and transformers 5's fused ones, as they are; row by row of the expert table (its hf_stacked
// names).
#include "engine/model/hf_stacked_experts.hpp"

#include <algorithm>
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/model/mxfp4_hf.hpp"

namespace cbatch {
namespace {

using Bytes = std::vector<uint8_t>;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

const SafetensorsFile& file_holding(const TensorFileOf& file_of, const std::string& name) {
  const SafetensorsFile* file = file_of(name);
  if (file == nullptr) throw Error("tensor '" + name + "' is missing");
  return *file;
}

// Source row of output row r: r itself, or gate/up de-interleaved (2r in the first half, 2(r - half) + 1
// in the second).
int64_t source_row(int64_t r, int64_t rows, bool interleaved) {
  const int64_t half = rows / 2;
  return !interleaved ? r : r < half ? 2 * r : 2 * (r - half) + 1;
}

// out (experts, rows, cols) of T from a transposed src (experts, cols, rows): element (e, r, c) = src (e, c,
// source_row(r)). Tiles of 64 output rows, so that the reads of a source row stay within a few cache lines.
template <typename T>
void transpose_rows(const uint8_t* src_bytes, uint8_t* out_bytes, int64_t experts, int64_t rows, int64_t cols,
                    bool interleaved) {
  const T* src = reinterpret_cast<const T*>(src_bytes);
  T* out = reinterpret_cast<T*>(out_bytes);
  constexpr int64_t kTile = 64;
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c = 0; c < cols; ++c) {
        const T* in = src + (e * cols + c) * rows;
        for (int64_t r = r0; r < r1; ++r) out[(e * rows + r) * cols + c] = in[source_row(r, rows, interleaved)];
      }
    }
  }
}

// Output element (e, r, c) of (experts, rows, cols) elements of elem_bytes each comes from source row
// source_row(r) at column c of a source (experts, rows, cols), or of a transposed source (experts, cols,
// rows) (elements of 2 or 4 bytes).
std::shared_ptr<Bytes> rearrange(const uint8_t* src, int64_t elem_bytes, int64_t experts, int64_t rows, int64_t cols,
                                 bool transposed, bool interleaved) {
  auto out = std::make_shared<Bytes>(static_cast<size_t>(experts * rows * cols * elem_bytes));
  if (transposed && elem_bytes == 2) {
    transpose_rows<uint16_t>(src, out->data(), experts, rows, cols, interleaved);
  } else if (transposed) {
    transpose_rows<uint32_t>(src, out->data(), experts, rows, cols, interleaved);
  } else {
    const size_t row_bytes = static_cast<size_t>(cols * elem_bytes);
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(out->data() + (e * rows + r) * cols * elem_bytes,
                    src + (e * rows + source_row(r, rows, interleaved)) * cols * elem_bytes, row_bytes);
      }
    }
  }
  return out;
}

// A plain (F32, BF16, F16) tensor's entry, checked against the shape the config needs.
const SafetensorsTensor& plain_entry(const SafetensorsFile& file, const std::string& name,
                                     const std::vector<int64_t>& shape, const char* dims) {
  const SafetensorsTensor& t = file.entry(name);
  if (!t.is_supported) {
    throw Error("'" + file.path() + "': tensor '" + name + "' has dtype " + t.dtype + " (supported: F32, F16, BF16)");
  }
  if (t.shape != shape) {
    throw Error("'" + file.path() + "': tensor '" + name + "' has shape " + shape_text(t.shape) +
                ", the config needs " + shape_text(shape) + " " + dims);
  }
  return t;
}

TensorView view_of(std::string name, DType dtype, int64_t rows, int64_t cols, const uint8_t* data) {
  TensorView v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.rows = rows;
  v.cols = cols;
  v.data = data;
  return v;
}

// One stacked matrix as (experts * out, in) in our layout: from MXFP4 pairs (rows moved) or a plain
// (experts, in, out) tensor (transposed). out_rows = 2 * width with interleaved gate and up.
TensorView read_matrix(const TensorFileOf& file_of, const std::string& name, int64_t experts, int64_t out_rows,
                       int64_t in_cols, bool interleaved, StackedExperts& result) {
  if (file_of(name + "_blocks") != nullptr) {
    const OwnedTensor t = read_hf_mxfp4(file_holding(file_of, name + "_blocks"),
                                        file_holding(file_of, name + "_scales"), name);
    if (t.view.rows != experts * out_rows || t.view.cols != in_cols) {
      throw Error("MXFP4 tensor '" + name + "_blocks' holds (" + std::to_string(t.view.rows) + ", " +
                  std::to_string(t.view.cols) + ") weights, the config needs [" + std::to_string(experts) + ", " +
                  std::to_string(out_rows) + ", " + std::to_string(in_cols) + "] (experts, out, in)");
    }
    if (!interleaved) {  // already our layout: keep the converted buffer
      result.buffers.push_back(t.bytes);
      return t.view;
    }
    const int64_t stride = row_bytes(DType::kMXFP4, in_cols);
    auto bytes = rearrange(static_cast<const uint8_t*>(t.view.data), stride, experts, out_rows, 1, false, interleaved);
    result.buffers.push_back(bytes);
    return view_of(name, DType::kMXFP4, experts * out_rows, in_cols, bytes->data());
  }
  const SafetensorsFile& file = file_holding(file_of, name);
  const SafetensorsTensor& t = plain_entry(file, name, {experts, in_cols, out_rows}, "(experts, in, out)");
  auto bytes = rearrange(file.bytes(t), row_bytes(t.type, 1), experts, out_rows, in_cols, true, interleaved);
  result.buffers.push_back(bytes);
  return view_of(name, t.type, experts * out_rows, in_cols, bytes->data());
}

// A stacked matrix already (experts, out, in), its rows in table order: a view of the file.
TensorView read_out_in(const TensorFileOf& file_of, const std::string& name, int64_t experts, int64_t out_rows,
                       int64_t in_cols) {
  const SafetensorsFile& file = file_holding(file_of, name);
  const SafetensorsTensor& t = plain_entry(file, name, {experts, out_rows, in_cols}, "(experts, out, in)");
  return view_of(name, t.type, experts * out_rows, in_cols, file.bytes(t));
}

// A stacked bias (experts, n) as bytes in our order (gate then up when interleaved).
TensorView read_bias(const TensorFileOf& file_of, const std::string& name, int64_t experts, int64_t n,
                     bool interleaved, StackedExperts& result) {
  const SafetensorsFile& file = file_holding(file_of, name);
  const SafetensorsTensor& t = plain_entry(file, name, {experts, n}, "(experts, out)");
  auto bytes = rearrange(file.bytes(t), row_bytes(t.type, 1), experts, n, 1, false, interleaved);
  result.buffers.push_back(bytes);
  return view_of(name, t.type, experts, n, bytes->data());
}

// Rows [row, row + rows) of a stacked view, or of one bias row's columns [col, col + cols).
TensorView part(const TensorView& all, const std::string& label, int64_t row, int64_t rows, int64_t cols,
                int64_t col = 0) {
  const int64_t offset = row * row_bytes(all.dtype, all.cols) + (col > 0 ? row_bytes(all.dtype, col) : 0);
  return view_of(all.name + "[" + label + "]", all.dtype, rows, cols, static_cast<const uint8_t*>(all.data) + offset);
}

// One stacked tensor and the expert rows it holds (table order): several rows share it interleaved.
struct StackedTensor {
  std::string name;
  std::vector<const ExpertTensorRow*> rows;
};

// A row's stacked name under the layer prefix, its "mlp." replaced by `module`.
std::string stacked_name(const std::string& prefix, std::string_view module, std::string_view stacked) {
  constexpr std::string_view kMlp = "mlp.";
  if (stacked.starts_with(kMlp)) stacked.remove_prefix(kMlp.size());
  return prefix + std::string(module) + std::string(stacked);
}

// The expert table's hf_stacked names (under `module`), or its hf_stacked_other ones when the first is not
// in the files.
bool uses_other_names(const TensorFileOf& file_of, const std::string& prefix, std::string_view module) {
  const ExpertTensorRow& gate = expert_row(ExpertTensor::kGate);
  const std::string name = stacked_name(prefix, module, gate.hf_stacked);
  return file_of(name) == nullptr && file_of(name + "_blocks") == nullptr && !gate.hf_stacked_other.empty() &&
         file_of(prefix + std::string(gate.hf_stacked_other)) != nullptr;
}

std::vector<StackedTensor> stacked_tensors(const std::string& prefix, const ModelConfig& c, std::string_view module,
                                           bool other) {
  std::vector<StackedTensor> stacked;
  for (const ExpertTensorRow& row : expert_tensor_rows()) {
    if (!row.present(c)) continue;
    const std::string name = other ? prefix + std::string(row.hf_stacked_other) : stacked_name(prefix, module, row.hf_stacked);
    if (stacked.empty() || stacked.back().name != name) stacked.push_back({name, {}});
    stacked.back().rows.push_back(&row);
  }
  return stacked;
}

bool is_vector(const StackedTensor& t) { return t.rows.front()->shape.rows == Size::kOne; }

// An expert's outputs in the stacked tensor: the rows of its rows' matrices, or the values of its vectors.
int64_t outputs(const StackedTensor& t, const ModelConfig& c) {
  int64_t total = 0;
  for (const ExpertTensorRow* row : t.rows) total += size_of(is_vector(t) ? row->shape.cols : row->shape.rows, c);
  return total;
}

// Each expert's view of every row the stacked tensor holds: matrices as rows of it, vectors as columns of
// its row (gate then up, once de-interleaved).
void split_experts(const TensorView& all, const StackedTensor& t, const ModelConfig& c, StackedExperts& s) {
  const int64_t total = outputs(t, c);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    int64_t offset = 0;
    for (const ExpertTensorRow* row : t.rows) {
      const std::string label = "expert " + std::to_string(e) + (t.rows.size() > 1 ? " " + std::string(row->label) : "");
      const int64_t cols = size_of(row->shape.cols, c);
      if (is_vector(t)) {
        s.experts[static_cast<size_t>(e)][row->kind] = part(all, label, e, 1, cols, offset);
        offset += cols;
      } else {
        const int64_t rows = size_of(row->shape.rows, c);
        s.experts[static_cast<size_t>(e)][row->kind] = part(all, label, e * total + offset, rows, cols);
        offset += rows;
      }
    }
  }
}

}  // namespace

bool has_stacked_experts(const TensorFileOf& file_of, const std::string& prefix, std::string_view module) {
  const std::string name = stacked_name(prefix, module, expert_row(ExpertTensor::kGate).hf_stacked);
  return file_of(name) != nullptr || file_of(name + "_blocks") != nullptr || uses_other_names(file_of, prefix, module);
}

StackedExperts read_stacked_experts(const TensorFileOf& file_of, const std::string& prefix, const ModelConfig& c,
                                    StackedLayout layout, std::string_view module) {
  StackedExperts s;
  s.experts.resize(static_cast<size_t>(c.num_experts));
  const int64_t n = c.num_experts;
  for (const StackedTensor& t : stacked_tensors(prefix, c, module, uses_other_names(file_of, prefix, module))) {
    const int64_t cols = size_of(t.rows.front()->shape.cols, c);
    if (layout == StackedLayout::kOutIn && !is_vector(t)) {
      split_experts(read_out_in(file_of, t.name, n, outputs(t, c), cols), t, c, s);
      continue;
    }
    const bool interleaved = t.rows.size() > 1;  // gpt-oss's gate and up
    const TensorView all = is_vector(t) ? read_bias(file_of, t.name, n, outputs(t, c), interleaved, s)
                                        : read_matrix(file_of, t.name, n, outputs(t, c), cols, interleaved, s);
    split_experts(all, t, c, s);
  }
  return s;
}

}  // namespace cbatch
