// Typed access to a parsed GGUF file: metadata getters that name the file and key on a mismatch,
// tensor lookup, and views of tensor data inside the mapping.
#include "engine/base/error.hpp"
#include "engine/model/gguf.hpp"

namespace cbatch {
namespace {

bool is_int_value(const GgufValue& v) { return v.is_integer(); }
bool is_number_value(const GgufValue& v) { return v.is_integer() || v.is_float(); }
bool is_bool_value(const GgufValue& v) { return v.type == GgufType::kBool || v.is_integer(); }
bool is_string_value(const GgufValue& v) { return v.type == GgufType::kString; }
bool is_string_array(const GgufValue& v) {
  return v.type == GgufType::kArray && v.array_type == GgufType::kString;
}
bool is_number_array(const GgufValue& v) {
  return v.type == GgufType::kArray && static_cast<int64_t>(v.floats.size() + v.ints.size()) == v.array_size;
}
bool is_int_array(const GgufValue& v) {
  return v.type == GgufType::kArray && static_cast<int64_t>(v.ints.size()) == v.array_size;
}

}  // namespace

bool GgufValue::is_integer() const {
  return type != GgufType::kFloat32 && type != GgufType::kFloat64 && type != GgufType::kString &&
         type != GgufType::kArray;
}

bool GgufValue::is_float() const { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }

int64_t GgufTensorInfo::rows() const {
  int64_t rows = 1;
  for (size_t d = 1; d < dims.size(); ++d) rows *= dims[d];
  return rows;
}

std::string ggml_type_name(uint32_t ggml_type) {
  static const char* const kNames[] = {
      "F32",   "F16",    "Q4_0", "Q4_1", "Q4_2", "Q4_3",    "Q5_0",   "Q5_1",    "Q8_0",  "Q8_1",   "Q2_K",
      "Q3_K",  "Q4_K",   "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
      "IQ2_S", "IQ4_XS", "I8",   "I16",  "I32",  "I64",     "F64",    "IQ1_M",   "BF16",  "Q4_0_4_4", "Q4_0_4_8",
      "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (ggml_type < sizeof(kNames) / sizeof(kNames[0])) return kNames[ggml_type];
  return "type " + std::to_string(ggml_type);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::require(std::string_view key, bool ok_type(const GgufValue&),
                                   const char* expected) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw Error("'" + path() + "': GGUF metadata key '" + std::string(key) + "' is missing");
  if (!ok_type(*v)) {
    throw Error("'" + path() + "': GGUF metadata key '" + std::string(key) + "' is not " + expected);
  }
  return *v;
}

int64_t GgufFile::get_int(std::string_view key) const {
  return require(key, is_int_value, "an integer").int_value;
}

int64_t GgufFile::get_int(std::string_view key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}

double GgufFile::get_float(std::string_view key, double fallback) const {
  if (!find(key)) return fallback;
  const GgufValue& v = require(key, is_number_value, "a number");
  return v.is_float() ? v.float_value : static_cast<double>(v.int_value);
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
  return find(key) ? require(key, is_bool_value, "a bool").int_value != 0 : fallback;
}

std::string GgufFile::get_string(std::string_view key) const {
  return require(key, is_string_value, "a string").string_value;
}

std::string GgufFile::get_string(std::string_view key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}

const std::vector<std::string>& GgufFile::get_strings(std::string_view key) const {
  return require(key, is_string_array, "an array of strings").strings;
}

const std::vector<double>& GgufFile::get_floats(std::string_view key) const {
  const GgufValue& v = require(key, is_number_array, "an array of numbers");
  if (!v.ints.empty()) {
    throw Error("'" + path() + "': GGUF metadata key '" + std::string(key) +
                "' holds integers, expected floats");
  }
  return v.floats;
}

const std::vector<int64_t>& GgufFile::get_ints(std::string_view key) const {
  return require(key, is_int_array, "an array of integers").ints;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

TensorView GgufFile::tensor_view(const GgufTensorInfo& info) const {
  if (!info.is_supported) {
    throw Error("'" + path() + "': tensor '" + info.name + "' has ggml type " +
                ggml_type_name(info.ggml_type) + " (" + std::to_string(info.ggml_type) +
                "), which cbatch does not support (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
                "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4)");
  }
  TensorView view;
  view.name = info.name;
  view.dtype = info.dtype;
  view.rows = info.rows();
  view.cols = info.cols();
  view.data = file_->data() + data_offset_ + info.offset;
  return view;
}

}  // namespace cbatch
