// Reader of GGUF v2/v3 files: header, typed metadata (scalars, strings, arrays) and tensor infos, over
// a memory mapping. Every read is bounds-checked against the file size: a truncated or corrupt file
// throws cbatch::Error naming the file and the defect, and counts are capped by the bytes that remain,
// so a corrupt count never causes a giant allocation. Tensor dims follow ggml: ne[0] is the fastest
// axis, so a 2-D tensor is (rows = ne[1], cols = ne[0]); higher dims fold into rows.
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

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

struct GgufValue {
  GgufType type = GgufType::kUint8;
  GgufType array_type = GgufType::kUint8;  // element type when type == kArray
  int64_t int_value = 0;                   // integer and bool scalars (uint64 above 2^63 wraps)
  double float_value = 0.0;                // float32 / float64 scalars
  std::string string_value;
  int64_t array_size = 0;            // elements, also of nested arrays (whose items are skipped)
  std::vector<int64_t> ints;         // (array_size) when the elements are integers or bools
  std::vector<double> floats;        // (array_size) when the elements are floats
  std::vector<std::string> strings;  // (array_size) when the elements are strings

  bool is_integer() const;  // any integer type or bool
  bool is_float() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ne[0] (fastest) first, 1 to 4 entries
  uint32_t ggml_type = 0;
  bool is_supported = false;  // ggml_type maps to a DType (tensor.hpp: F32, F16, BF16 and the GGUF block types)
  DType dtype = DType::kF32;  // valid when is_supported
  uint64_t offset = 0;        // bytes from the start of the data section

  int64_t cols() const { return dims.empty() ? 1 : dims[0]; }
  int64_t rows() const;  // product of dims[1..]
};

// Name of a ggml tensor type ("Q4_K", ...), "type N" when unknown.
std::string ggml_type_name(uint32_t ggml_type);

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }

  // Metadata lookup. The one-argument getters throw cbatch::Error (naming the file and key) when the
  // key is missing or of another type; the getters with a fallback only when it is of another type.
  const GgufValue* find(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key, double fallback) const;  // integers are accepted too
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, const std::string& fallback) const;
  const std::vector<std::string>& get_strings(std::string_view key) const;
  const std::vector<double>& get_floats(std::string_view key) const;  // float (or integer) arrays
  const std::vector<int64_t>& get_ints(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A view into the mapping; throws when the tensor's ggml type is not supported.
  TensorView tensor_view(const GgufTensorInfo& info) const;

 private:
  const GgufValue& require(std::string_view key, bool ok_type(const GgufValue&), const char* expected) const;
  void check_tensor_bounds() const;
  void check_tensor_spacing() const;

  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index into tensors_
};

}  // namespace cbatch
