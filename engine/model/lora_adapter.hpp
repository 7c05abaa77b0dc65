// LoRA adapters (--lora-modules NAME=PATH): a PEFT directory (adapter_config.json, adapter_model.safetensors)
// or a llama.cpp GGUF LoRA file, read into fp32 pairs checked against the base model's shapes, layer by layer
// (each layer's kind and sizes: lora_targets.hpp). A pair adds scale * B (A x) to one projection: A (rank,
// in_features), B (rows, rank). The backends fuse rows into one product (q|k|v, gate|up, a DeltaNet's q|k|v|z
// and b|a), so a pair names its product and the rows it adds to (a q adapter only touches the q rows). B's q/k
// rows are put in the base's RoPE row order (llama.cpp permutes `llama` q/k), and a DeltaNet's value heads
// (B's rows, out_proj's A columns) in the base's value-head order (llama.cpp tiles Qwen3.5's).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/lora_product.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

struct LoraPair {
  std::string module;       // as the file names it after the layer: "self_attn.q_proj", "attn_q", ...
  int layer = 0;
  LoraProduct product = LoraProduct::kQkv;
  int64_t row_offset = 0;   // first row of the product it adds to
  int64_t rows = 0;         // output features
  int64_t in_features = 0;
  int rank = 0;
  float scale = 1.0f;       // alpha / rank, or alpha / sqrt(rank) with rsLoRA
  std::vector<float> a;     // (rank, in_features)
  std::vector<float> b;     // (rows, rank)
};

struct LoraAdapter {
  std::string name;
  std::string path;
  std::string format;       // "peft" or "gguf"
  int rank = 0;             // the largest rank of its pairs
  std::string base_model;   // base_model_name_or_path (PEFT), general.basename (GGUF); "" when absent
  std::vector<LoraPair> pairs;
  std::vector<std::string> notes;  // modules skipped because the layer never uses them (why), for warnings
};

struct LoraModuleArg {
  std::string name;
  std::string path;
};

// "NAME=PATH"; throws cbatch::Error naming the argument when either side is empty.
LoraModuleArg parse_lora_module(std::string_view arg);

// Reads and checks one adapter against the base. Throws cbatch::Error starting "LoRA adapter 'NAME' (PATH): "
// for a missing or unreadable file, a rank above max_rank, a target the base does not have in that layer
// (naming the layer and the module), shapes that do not match, or another architecture.
LoraAdapter load_lora_adapter(const LoraModuleArg& arg, const ModelConfig& base, int max_rank);

// Every --lora-modules argument, in order (adapter id = index + 1); a duplicate NAME, or a NAME equal to
// `base_name`, is an error. Warnings (a different base_model_name_or_path, skipped modules) go to `warnings`.
std::vector<LoraAdapter> load_lora_adapters(const std::vector<std::string>& args, const ModelConfig& base,
                                            const std::string& base_path, int max_rank,
                                            std::vector<std::string>& warnings);

}  // namespace cbatch
