// Reader of safetensors files over a read-only memory mapping: an 8-byte little-endian header length,
// a JSON header {"NAME": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
// the data. Every offset is checked against the file and against dtype x shape before any view is
// made, so a truncated or corrupt file throws cbatch::Error naming the file and the tensor.
// Tensor views: a 2-D tensor (rows, cols) = shape; 1-D is (1, n); leading dims fold into rows.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/mapped_file.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {

struct SafetensorsTensor {
  std::string dtype;           // as written: "F32", "BF16", "I64", ...
  bool is_supported = false;   // F32, F16 or BF16
  DType type = DType::kF32;    // valid when is_supported
  std::vector<int64_t> shape;
  uint64_t begin = 0;          // byte offsets into the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, SafetensorsTensor, std::less<>>& tensors() const { return tensors_; }
  bool has(std::string_view name) const { return tensors_.count(name) != 0; }
  // A view into the mapping; throws when the tensor is missing or of an unsupported dtype.
  TensorView view(std::string_view name) const;
  // A tensor's entry and its bytes in the mapping (any dtype); throws when it is missing.
  const SafetensorsTensor& entry(std::string_view name) const;
  const uint8_t* bytes(const SafetensorsTensor& tensor) const { return file_->data() + data_offset_ + tensor.begin; }
  // Gives back the resident pages of a tensor read once and converted (MappedFile::release).
  void release(const SafetensorsTensor& tensor) const { file_->release(bytes(tensor), tensor.end - tensor.begin); }

 private:
  void read_header();

  std::shared_ptr<const MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::map<std::string, SafetensorsTensor, std::less<>> tensors_;
};

}  // namespace cbatch
