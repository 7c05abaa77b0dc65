// Lookup and checks of a quantized Linear's stored tensors (quantized_parts.hpp).
#include "engine/model/quantized_parts.hpp"

#include <cstring>

#include "engine/base/error.hpp"

namespace cbatch {

std::string shape_list(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

QuantizedParts::QuantizedParts(const TensorFileOf& file_of, const std::string& weight_name, std::string scheme)
    : file_of_(file_of), stem_(weight_name.substr(0, weight_name.size() - std::string("weight").size())),
      scheme_(std::move(scheme)) {}

QuantizedParts::~QuantizedParts() {
  for (const std::string& suffix : read_) {
    const SafetensorsFile* f = file_of_(name(suffix));
    if (f != nullptr) f->release(f->entry(name(suffix)));
  }
}

const SafetensorsFile& QuantizedParts::file(const std::string& suffix) const {
  const SafetensorsFile* f = file_of_(name(suffix));
  if (f == nullptr) {
    throw Error(scheme_ + " tensor '" + name(suffix) + "' is missing (the quantized form of '" + name("weight") + "')");
  }
  return *f;
}

void QuantizedParts::fail(const std::string& suffix, const std::string& problem) const {
  const SafetensorsFile* f = file_of_(name(suffix));
  throw Error((f ? "'" + f->path() + "': " : std::string()) + scheme_ + " tensor '" + name(suffix) + "' " + problem);
}

const SafetensorsTensor& QuantizedParts::entry(const std::string& suffix, const std::string& dtype) const {
  const SafetensorsTensor& t = file(suffix).entry(name(suffix));
  const bool ok = dtype.empty() ? t.is_supported : t.dtype == dtype;
  if (!ok) fail(suffix, "has dtype " + t.dtype + ", expected " + (dtype.empty() ? "F32, F16 or BF16" : dtype));
  return t;
}

void QuantizedParts::expect_shape(const std::string& suffix, const std::vector<int64_t>& shape,
                                  const std::string& what) const {
  const SafetensorsTensor& t = file(suffix).entry(name(suffix));
  if (t.shape != shape) fail(suffix, "has shape " + shape_list(t.shape) + ", expected " + shape_list(shape) + " (" + what + ")");
}

const SafetensorsTensor& QuantizedParts::stored(const std::string& suffix) const {
  return file(suffix).entry(name(suffix));
}

std::vector<int32_t> checked_groups(const QuantizedParts& parts, const std::string& suffix, int64_t in,
                                    int64_t num_groups, int64_t group_rows) {
  parts.expect_shape(suffix, {in}, "one group per input row");
  const std::vector<int32_t> g = parts.ints(suffix);
  std::vector<int64_t> count(static_cast<size_t>(num_groups), 0);
  for (int64_t k = 0; k < in; ++k) {
    const int32_t group = g[static_cast<size_t>(k)];
    if (group < 0 || group >= num_groups) {
      parts.fail(suffix, "puts input row " + std::to_string(k) + " in group " + std::to_string(group) + " of " +
                             std::to_string(num_groups) + ": not a valid group assignment");
    }
    ++count[static_cast<size_t>(group)];
  }
  for (int64_t group = 0; group < num_groups; ++group) {
    if (count[static_cast<size_t>(group)] != group_rows) {
      parts.fail(suffix, "gives group " + std::to_string(group) + " " + std::to_string(count[static_cast<size_t>(group)]) +
                             " input rows, the group size is " + std::to_string(group_rows) +
                             ": not a valid group assignment");
    }
  }
  return g;
}

const uint8_t* QuantizedParts::bytes(const std::string& suffix) const {
  const SafetensorsFile& f = file(suffix);
  read_.push_back(suffix);
  return f.bytes(f.entry(name(suffix)));
}

std::vector<uint32_t> QuantizedParts::words(const std::string& suffix) const {
  const SafetensorsTensor& t = entry(suffix, "I32");
  std::vector<uint32_t> out((t.end - t.begin) / 4);
  std::memcpy(out.data(), bytes(suffix), out.size() * 4);  // little-endian, as the file
  return out;
}

std::vector<int32_t> QuantizedParts::ints(const std::string& suffix) const {
  const std::vector<uint32_t> w = words(suffix);
  std::vector<int32_t> out(w.size());
  std::memcpy(out.data(), w.data(), w.size() * 4);
  return out;
}

std::vector<float> QuantizedParts::floats(const std::string& suffix) const {
  entry(suffix, "");
  const TensorView v = file(suffix).view(name(suffix));
  read_.push_back(suffix);
  std::vector<float> out(static_cast<size_t>(v.numel()));
  tensor_rows_to_f32(v, 0, v.rows, out.data());
  return out;
}

OwnedTensor owned_tensor(const std::string& name, DType dtype, int64_t rows, int64_t cols,
                         std::shared_ptr<std::vector<uint8_t>> bytes) {
  OwnedTensor out;
  out.view.name = name;
  out.view.dtype = dtype;
  out.view.rows = rows;
  out.view.cols = cols;
  out.view.data = bytes->data();
  out.bytes = std::move(bytes);
  return out;
}

OwnedTensor owned_f32(const std::string& name, int64_t rows, int64_t cols, std::vector<float> values) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(float));
  std::memcpy(bytes->data(), values.data(), bytes->size());
  return owned_tensor(name, DType::kF32, rows, cols, std::move(bytes));
}

}  // namespace cbatch
