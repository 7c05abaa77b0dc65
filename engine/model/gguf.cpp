// GGUF parsing: header, metadata key/values and tensor infos, each read checked against the bytes left.
// Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 kv count, the kvs
// (string key, u32 type, value), the tensor infos (string name, u32 n_dims, u64 ne[n_dims], u32 type,
// u64 offset), padding to general.alignment, then the data section. Strings are u64 length + bytes.
#include "engine/model/gguf.hpp"

#include <algorithm>
#include <cstring>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;

class GgufReader {
 public:
  explicit GgufReader(const MappedFile& file) : path_(file.path()), data_(file.data()), size_(file.size()) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("'" + path_ + "': corrupt or truncated GGUF file: " + what + " (at byte " +
                std::to_string(pos_) + " of " + std::to_string(size_) + ")");
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(uint64_t num_bytes, const std::string& what) const {
    if (num_bytes > remaining()) {
      fail(what + " needs " + std::to_string(num_bytes) + " bytes, " + std::to_string(remaining()) + " left");
    }
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string read_string(const std::string& what) {
    const uint64_t length = read<uint64_t>(what + " length");
    need(length, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return s;
  }
  // A count of items that each take at least min_bytes cannot exceed the bytes left.
  void check_count(uint64_t count, uint64_t min_bytes, const std::string& what) const {
    if (count > remaining() / min_bytes) {
      fail(what + " " + std::to_string(count) + " is larger than the file allows");
    }
  }

 private:
  std::string path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

uint64_t scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
      return 8;  // the length; the minimum size of a string
    case GgufType::kArray:
      return 12;  // element type and count; the minimum size of an array
  }
  return 0;
}

// Reads one scalar of `type` into value (int_value, float_value or string_value).
void read_scalar(GgufReader& r, GgufType type, GgufValue& value, const std::string& what) {
  switch (type) {
    case GgufType::kUint8:
      value.int_value = r.read<uint8_t>(what);
      return;
    case GgufType::kInt8:
      value.int_value = r.read<int8_t>(what);
      return;
    case GgufType::kUint16:
      value.int_value = r.read<uint16_t>(what);
      return;
    case GgufType::kInt16:
      value.int_value = r.read<int16_t>(what);
      return;
    case GgufType::kUint32:
      value.int_value = r.read<uint32_t>(what);
      return;
    case GgufType::kInt32:
      value.int_value = r.read<int32_t>(what);
      return;
    case GgufType::kUint64:
      value.int_value = static_cast<int64_t>(r.read<uint64_t>(what));
      return;
    case GgufType::kInt64:
      value.int_value = r.read<int64_t>(what);
      return;
    case GgufType::kBool:
      value.int_value = r.read<uint8_t>(what) != 0;
      return;
    case GgufType::kFloat32:
      value.float_value = r.read<float>(what);
      return;
    case GgufType::kFloat64:
      value.float_value = r.read<double>(what);
      return;
    case GgufType::kString:
      value.string_value = r.read_string(what);
      return;
    case GgufType::kArray:
      break;
  }
  r.fail(what + ": unexpected value type");
}

GgufType read_type(GgufReader& r, const std::string& what) {
  const uint32_t type = r.read<uint32_t>(what + " type");
  if (type > static_cast<uint32_t>(GgufType::kFloat64)) {
    r.fail(what + " has unknown value type " + std::to_string(type));
  }
  return static_cast<GgufType>(type);
}

void read_value(GgufReader& r, GgufType type, GgufValue& value, const std::string& what, int depth);

void read_array(GgufReader& r, GgufValue& value, const std::string& what, int depth) {
  if (depth >= kMaxArrayDepth) r.fail(what + ": arrays nested too deeply");
  value.array_type = read_type(r, what + " element");
  const uint64_t count = r.read<uint64_t>(what + " element count");
  r.check_count(count, scalar_size(value.array_type), what + " element count");
  value.array_size = static_cast<int64_t>(count);
  if (value.array_type == GgufType::kString) value.strings.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    GgufValue item;
    read_value(r, value.array_type, item, what, depth + 1);  // nested arrays are read and dropped
    if (item.type == GgufType::kString) {
      value.strings.push_back(std::move(item.string_value));
    } else if (item.is_float()) {
      value.floats.push_back(item.float_value);
    } else if (item.is_integer()) {
      value.ints.push_back(item.int_value);
    }
  }
}

void read_value(GgufReader& r, GgufType type, GgufValue& value, const std::string& what, int depth) {
  value.type = type;
  if (type == GgufType::kArray) {
    read_array(r, value, what, depth);
  } else {
    read_scalar(r, type, value, what);
  }
}

bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

bool to_dtype(uint32_t ggml_type, DType& dtype) {
  switch (ggml_type) {
    case 0:
      dtype = DType::kF32;
      return true;
    case 1:
      dtype = DType::kF16;
      return true;
    case 2:
      dtype = DType::kQ4_0;
      return true;
    case 3:
      dtype = DType::kQ4_1;
      return true;
    case 6: dtype = DType::kQ5_0; return true;
    case 7: dtype = DType::kQ5_1; return true;
    case 8:
      dtype = DType::kQ8_0;
      return true;
    case 10: dtype = DType::kQ2_K; return true;
    case 11: dtype = DType::kQ3_K; return true;
    case 12: dtype = DType::kQ4_K; return true;
    case 13: dtype = DType::kQ5_K; return true;
    case 14: dtype = DType::kQ6_K; return true;
    case 20: dtype = DType::kIQ4_NL; return true;
    case 23: dtype = DType::kIQ4_XS; return true;
    case 39: dtype = DType::kMXFP4; return true;
    case 30:
      dtype = DType::kBF16;
      return true;
    default:
      return false;
  }
}

GgufTensorInfo read_tensor_info(GgufReader& r, size_t index) {
  const std::string what = "tensor info " + std::to_string(index);
  GgufTensorInfo info;
  info.name = r.read_string(what + " name");
  const uint32_t num_dims = r.read<uint32_t>("tensor '" + info.name + "' dim count");
  if (num_dims < 1 || num_dims > kMaxDims) {
    r.fail("tensor '" + info.name + "' has " + std::to_string(num_dims) + " dims (1 to 4 allowed)");
  }
  int64_t numel = 1;
  for (uint32_t d = 0; d < num_dims; ++d) {
    const uint64_t ne = r.read<uint64_t>("tensor '" + info.name + "' dims");
    if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX) || numel > INT64_MAX / static_cast<int64_t>(ne)) {
      r.fail("tensor '" + info.name + "' has an impossible shape (dim " + std::to_string(ne) + ")");
    }
    numel *= static_cast<int64_t>(ne);
    info.dims.push_back(static_cast<int64_t>(ne));
  }
  info.ggml_type = r.read<uint32_t>("tensor '" + info.name + "' type");
  info.is_supported = to_dtype(info.ggml_type, info.dtype);
  info.offset = r.read<uint64_t>("tensor '" + info.name + "' offset");
  return info;
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  GgufReader r(*file_);
  if (file_->size() < 4 || std::memcmp(file_->data(), "GGUF", 4) != 0) {
    throw Error("'" + path + "' is not a GGUF file (no GGUF magic)");
  }
  r.read<uint32_t>("magic");
  version_ = r.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    throw Error("'" + path + "': GGUF version " + std::to_string(version_) +
                " is not supported (only 2 and 3)");
  }
  const uint64_t num_tensors = r.read<uint64_t>("tensor count");
  const uint64_t num_kvs = r.read<uint64_t>("metadata count");
  r.check_count(num_kvs, 8 + 4 + 1, "metadata count");
  for (uint64_t i = 0; i < num_kvs; ++i) {
    std::string key = r.read_string("metadata key " + std::to_string(i));
    GgufValue value;
    read_value(r, read_type(r, "metadata '" + key + "'"), value, "metadata '" + key + "'", 0);
    if (!metadata_.emplace(key, std::move(value)).second) r.fail("duplicate metadata key '" + key + "'");
  }
  const int64_t alignment = get_int("general.alignment", 32);
  if (alignment <= 0 || !is_power_of_two(static_cast<uint64_t>(alignment))) {
    throw Error("'" + path + "': general.alignment " + std::to_string(alignment) + " is not a power of two");
  }
  alignment_ = static_cast<uint64_t>(alignment);
  r.check_count(num_tensors, 8 + 4 + 8 + 4 + 8, "tensor count");
  tensors_.reserve(num_tensors);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    tensors_.push_back(read_tensor_info(r, i));
    if (!tensor_index_.emplace(tensors_.back().name, i).second) {
      r.fail("duplicate tensor '" + tensors_.back().name + "'");
    }
  }
  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  check_tensor_bounds();
  check_tensor_spacing();
}

void GgufFile::check_tensor_bounds() const {
  const uint64_t file_size = file_->size();
  for (const GgufTensorInfo& t : tensors_) {
    const std::string where = "'" + path() + "': tensor '" + t.name + "'";
    if (t.offset % alignment_ != 0) {
      throw Error(where + " has offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
                  std::to_string(alignment_));
    }
    if (!t.is_supported) continue;  // its size is unknown here; tensor_view() rejects it
    if (t.cols() % dtype_block_elems(t.dtype) != 0) {
      throw Error(where + " has " + std::to_string(t.cols()) + " columns, not a multiple of the " +
                  std::string(dtype_name(t.dtype)) + " block size");
    }
    // Every supported dtype takes >= 0.5 bytes per element: a wider row cannot fit (nor overflow).
    const uint64_t available = file_size > data_offset_ ? file_size - data_offset_ : 0;
    const bool row_fits = static_cast<uint64_t>(t.cols()) <= 2 * available;
    const uint64_t row = row_fits ? static_cast<uint64_t>(row_bytes(t.dtype, t.cols())) : 0;
    const uint64_t rows = static_cast<uint64_t>(t.rows());
    const bool fits = row_fits && t.offset <= available && rows <= (available - t.offset) / row;
    if (!fits) {
      throw Error(where + " (offset " + std::to_string(t.offset) + ", " + std::to_string(rows) + " x " +
                  std::to_string(t.cols()) + " " + std::string(dtype_name(t.dtype)) +
                  ") extends beyond the end of the file (" + std::to_string(file_size) +
                  " bytes): the file is truncated or corrupt");
    }
  }
}

// ggml writes the tensors back to back, each padded to the alignment (and its reader requires it): a tensor
// whose shape and type need more or fewer bytes than lie before the next one (blocks of the wrong size, a
// wrong type or shape) would be read as garbage. Tensors of unsupported types have no known size here.
void GgufFile::check_tensor_spacing() const {
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 0; i + 1 < by_offset.size(); ++i) {
    const GgufTensorInfo& t = *by_offset[i];
    const GgufTensorInfo& next = *by_offset[i + 1];
    if (!t.is_supported) continue;
    // Fits the file (check_tensor_bounds), so no overflow.
    const uint64_t bytes = static_cast<uint64_t>(t.rows()) * static_cast<uint64_t>(row_bytes(t.dtype, t.cols()));
    const uint64_t padded = (bytes + alignment_ - 1) / alignment_ * alignment_;
    if (next.offset - t.offset != padded) {
      throw Error("'" + path() + "': tensor '" + t.name + "' (offset " + std::to_string(t.offset) + ", " +
                  std::to_string(t.rows()) + " x " + std::to_string(t.cols()) + " " +
                  std::string(dtype_name(t.dtype)) + ": " + std::to_string(bytes) + " bytes) has " +
                  std::to_string(next.offset - t.offset) + " bytes before the next tensor '" + next.name +
                  "': its size disagrees with its shape and type");
    }
  }
}

}  // namespace cbatch
