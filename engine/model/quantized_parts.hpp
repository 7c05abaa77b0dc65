// The stored tensors of one quantized Linear in a Hugging Face checkpoint, found by the name of the float
// weight they replace ("model.layers.0.mlp.up_proj.weight" -> "...up_proj.qweight", "...up_proj.scales", ...),
// each checked for its dtype and shape with a message that names the tensor and the file. Shared by the
// GPTQ, AWQ and FP8 readers (gptq.hpp, awq.hpp, fp8_hf.hpp), which expand a Linear to an f32 tensor.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/hf_stacked_experts.hpp"
#include "engine/model/mxfp4_hf.hpp"

namespace cbatch {

class QuantizedParts {
 public:
  // weight_name: the float weight's name ("....weight"); scheme: for messages ("GPTQ").
  QuantizedParts(const TensorFileOf& file_of, const std::string& weight_name, std::string scheme);
  // Gives back the mapped pages of every part it read (the readers copy them out): a checkpoint's codes
  // then stay resident once, in the form they are kept in, not also as the file's pages.
  ~QuantizedParts();
  QuantizedParts(const QuantizedParts&) = delete;
  QuantizedParts& operator=(const QuantizedParts&) = delete;

  std::string name(const std::string& suffix) const { return stem_ + suffix; }  // stem "....up_proj."
  bool has(const std::string& suffix) const { return file_of_(name(suffix)) != nullptr; }
  // The tensor's entry: throws when it is missing or not of `dtype` ("" accepts F32, F16 and BF16).
  const SafetensorsTensor& entry(const std::string& suffix, const std::string& dtype) const;
  const SafetensorsTensor& stored(const std::string& suffix) const;  // of any dtype
  // Throws unless the tensor has `shape`; `what` says what that shape means.
  void expect_shape(const std::string& suffix, const std::vector<int64_t>& shape, const std::string& what) const;
  std::vector<uint32_t> words(const std::string& suffix) const;  // an I32 tensor's words
  std::vector<int32_t> ints(const std::string& suffix) const;    // an I32 tensor's values
  std::vector<float> floats(const std::string& suffix) const;    // an F32 / F16 / BF16 tensor as fp32
  const uint8_t* bytes(const std::string& suffix) const;
  [[noreturn]] void fail(const std::string& suffix, const std::string& problem) const;

 private:
  const SafetensorsFile& file(const std::string& suffix) const;

  const TensorFileOf& file_of_;
  std::string stem_;
  std::string scheme_;
  mutable std::vector<std::string> read_;  // suffixes whose bytes were handed out
};

// The group of each of `in` input rows from the I32 tensor `suffix` (in): throws naming it unless every value
// is a group below num_groups and every group has group_rows rows (a valid group assignment).
std::vector<int32_t> checked_groups(const QuantizedParts& parts, const std::string& suffix, int64_t in,
                                    int64_t num_groups, int64_t group_rows);

// A tensor (rows, cols) of dtype owning `bytes` (its rows, as tensor.hpp lays them out), named `name`.
OwnedTensor owned_tensor(const std::string& name, DType dtype, int64_t rows, int64_t cols,
                         std::shared_ptr<std::vector<uint8_t>> bytes);

// An f32 tensor (rows, cols) owning `values`, named `name`.
OwnedTensor owned_f32(const std::string& name, int64_t rows, int64_t cols, std::vector<float> values);

std::string shape_list(const std::vector<int64_t>& shape);

}  // namespace cbatch
