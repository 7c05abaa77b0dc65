// Safetensors header parsing and bounds checks.
#include "engine/model/safetensors.hpp"

#include <simdjson.h>

#include <cstring>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit is 100 MB

bool supported_dtype(std::string_view name, DType* type, int64_t* elem_bytes) {
  if (name == "F32") {
    *type = DType::kF32;
    *elem_bytes = 4;
  } else if (name == "F16") {
    *type = DType::kF16;
    *elem_bytes = 2;
  } else if (name == "BF16") {
    *type = DType::kBF16;
    *elem_bytes = 2;
  } else {
    return false;
  }
  return true;
}

// Element size of the other safetensors dtypes, so their offsets can be checked too (0 if unknown).
int64_t other_dtype_bytes(std::string_view name) {
  if (name == "F64" || name == "I64" || name == "U64") return 8;
  if (name == "I32" || name == "U32") return 4;
  if (name == "I16" || name == "U16") return 2;
  if (name == "I8" || name == "U8" || name == "BOOL" || name == "F8_E4M3" || name == "F8_E5M2") return 1;
  return 0;
}

// One header entry {"dtype", "shape", "data_offsets"}, checked against the data section's size.
SafetensorsTensor parse_entry(simdjson::dom::element value, uint64_t data_bytes, const std::string& bad) {
  SafetensorsTensor t;
  std::string_view dtype;
  simdjson::dom::array shape, offsets;
  if (value["dtype"].get_string().get(dtype) || value["shape"].get_array().get(shape) ||
      value["data_offsets"].get_array().get(offsets) || offsets.size() != 2) {
    throw Error(bad + "needs fields 'dtype' (string), 'shape' (array) and 'data_offsets' ([begin, end])");
  }
  t.dtype = std::string(dtype);
  int64_t numel = 1;
  for (simdjson::dom::element d : shape) {
    int64_t n;
    if (d.get_int64().get(n) || n < 0 || (n > 0 && numel > INT64_MAX / n)) throw Error(bad + "has an invalid shape");
    numel *= n;
    t.shape.push_back(n);
  }
  if (offsets.at(0).get_uint64().get(t.begin) || offsets.at(1).get_uint64().get(t.end) || t.begin > t.end ||
      t.end > data_bytes) {
    throw Error(bad + "has data_offsets outside the data (" + std::to_string(data_bytes) + " bytes)");
  }
  int64_t elem_bytes = 0;
  t.is_supported = supported_dtype(t.dtype, &t.type, &elem_bytes);
  if (!t.is_supported) elem_bytes = other_dtype_bytes(t.dtype);
  if (elem_bytes > 0 && (numel > INT64_MAX / elem_bytes || t.end - t.begin != static_cast<uint64_t>(numel * elem_bytes))) {
    throw Error(bad + "holds " + std::to_string(t.end - t.begin) + " bytes, its " + t.dtype + " shape needs " +
                std::to_string(numel * elem_bytes));
  }
  return t;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  read_header();
}

void SafetensorsFile::read_header() {
  const std::string where = "'" + path() + "'";
  uint64_t header_bytes = 0;
  if (file_->size() < 8) throw Error(where + " is not a safetensors file (shorter than its 8-byte header length)");
  std::memcpy(&header_bytes, file_->data(), 8);
  if (header_bytes > kMaxHeaderBytes || header_bytes > file_->size() - 8) {
    throw Error(where + ": safetensors header length " + std::to_string(header_bytes) +
                " does not fit the file (" + std::to_string(file_->size()) + " bytes)");
  }
  data_offset_ = 8 + header_bytes;
  simdjson::dom::parser parser;
  simdjson::dom::object header;
  const simdjson::padded_string json(reinterpret_cast<const char*>(file_->data() + 8), header_bytes);
  if (auto error = parser.parse(json).get(header)) {
    throw Error(where + ": the safetensors header is not a JSON object: " + simdjson::error_message(error));
  }
  for (auto [key, value] : header) {
    if (key == "__metadata__") continue;
    const std::string name(key);
    tensors_.emplace(name, parse_entry(value, file_->size() - data_offset_, where + ": tensor '" + name + "' "));
  }
}

const SafetensorsTensor& SafetensorsFile::entry(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("'" + path() + "': tensor '" + std::string(name) + "' is missing");
  return it->second;
}

TensorView SafetensorsFile::view(std::string_view name) const {
  const SafetensorsTensor& t = entry(name);
  if (!t.is_supported) {
    throw Error("'" + path() + "': tensor '" + std::string(name) + "' has dtype " + t.dtype +
                ", which cbatch does not support (supported: F32, F16, BF16)");
  }
  TensorView v;
  v.name = std::string(name);
  v.dtype = t.type;
  v.cols = t.shape.empty() ? 1 : t.shape.back();
  v.rows = 1;
  for (size_t d = 0; d + 1 < t.shape.size(); ++d) v.rows *= t.shape[d];
  v.data = bytes(t);
  return v;
}

}  // namespace cbatch
