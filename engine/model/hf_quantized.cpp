// The choice of reader per quantization method (hf_quantized.hpp).
#include "engine/model/hf_quantized.hpp"

#include "engine/base/error.hpp"
#include "engine/model/awq.hpp"
#include "engine/model/fp8_hf.hpp"
#include "engine/model/gptq.hpp"
#include "engine/model/nvfp4_hf.hpp"
#include "engine/model/pack_quantized.hpp"

namespace cbatch {
namespace {

constexpr std::string_view kWeight = "weight";

bool is_weight(const std::string& name) {
  return name.size() > kWeight.size() && name.compare(name.size() - kWeight.size(), kWeight.size(), kWeight) == 0;
}

std::string stem(const std::string& name) { return name.substr(0, name.size() - kWeight.size()); }

bool is_packed_int(const QuantizationConfig& q) { return q.method == "gptq" || q.method == "awq"; }
bool is_packed_int_ct(const QuantizationConfig& q) {
  return q.method == "compressed-tensors" && q.format == "pack-quantized";
}
bool is_nvfp4(const QuantizationConfig& q) {
  return q.method == "compressed-tensors" && q.format == "nvfp4-pack-quantized";
}

}  // namespace

bool keeps_int_codes(const QuantizationConfig& q) { return is_packed_int(q) || is_packed_int_ct(q); }

bool is_stored_quantized(const TensorFileOf& file_of, const QuantizationConfig& q, const std::string& name) {
  if (!is_weight(name)) return false;
  if (is_packed_int(q)) return file_of(stem(name) + "qweight") != nullptr;
  if (is_packed_int_ct(q) || is_nvfp4(q)) return file_of(name + "_packed") != nullptr;
  if (is_fp8(q)) {
    const SafetensorsFile* file = file_of(name);
    return file != nullptr && file->entry(name).dtype == "F8_E4M3";
  }
  return false;
}

OwnedTensor read_quantized(const TensorFileOf& file_of, const QuantizationConfig& q, const std::string& name) {
  if (q.method == "gptq") return read_gptq(file_of, name, q);
  if (q.method == "awq") return read_awq(file_of, name, q);
  if (is_packed_int_ct(q)) return read_pack_quantized(file_of, name, q);
  if (is_nvfp4(q)) return read_nvfp4(file_of, name);
  if (is_fp8(q)) return read_fp8(file_of, name, q);
  throw Error("tensor '" + name + "': quantization method '" + q.method + "' has no reader");
}

}  // namespace cbatch
