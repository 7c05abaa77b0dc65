// A Hugging Face config.json of a Llama-family model as a ModelConfig plus its special token ids.
// Shared by dummy:CONFIG.json models and Hugging Face model directories. Missing required fields or
// fields of the wrong type throw cbatch::Error naming the file and the field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.hpp"

namespace cbatch {

struct HfConfig {
  ModelConfig config;            // rope_layout kHalves (HF rotates halves)
  int32_t bos_id = -1;           // -1 when the file has none
  std::vector<int32_t> eos_ids;  // eos_token_id as an int or a list; empty when none
  std::string torch_dtype;       // "bfloat16", "float32", ... ("" when absent); the files decide
  std::vector<std::string> notes;  // what the model's files hold that cbatch leaves out on purpose
};

HfConfig read_hf_config(const std::string& path);

}  // namespace cbatch
