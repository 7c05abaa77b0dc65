// LoRA adapters (--lora-modules NAME=PATH): a PEFT directory (adapter_config.json, adapter_model.safetensors)
// or a llama.cpp GGUF LoRA file, read into fp32 pairs checked against the base model's shapes. A pair adds
// scale * B (A x) to one projection: A (rank, in_features), B (rows, rank). The CPU backend fuses q|k|v and
// gate|up into one product each, so a pair names its product and the rows it adds to (a q adapter only
// touches the q rows). B's q/k rows are put in the base's RoPE row order (llama.cpp permutes `llama` q/k).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.hpp"

namespace cbatch {

// The four products of a layer that adapters add to.
enum class LoraProduct : uint8_t { kQkv, kO, kGateUp, kDown };
constexpr int kNumLoraProducts = 4;

struct LoraPair {
  std::string module;       // as the file names it: "q_proj", "attn_q", ...
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
};

struct LoraModuleArg {
  std::string name;
  std::string path;
};

// "NAME=PATH"; throws cbatch::Error naming the argument when either side is empty.
LoraModuleArg parse_lora_module(std::string_view arg);

// Reads and checks one adapter against the base. Throws cbatch::Error starting "LoRA adapter 'NAME' (PATH): "
// for a missing or unreadable file, a rank above max_rank, a target the base does not have, shapes that do
// not match, or another architecture.
LoraAdapter load_lora_adapter(const LoraModuleArg& arg, const ModelConfig& base, int max_rank);

// Every --lora-modules argument, in order (adapter id = index + 1); a duplicate NAME, or a NAME equal to
// `base_name`, is an error. Warnings (a different base_model_name_or_path) go to `warnings`.
std::vector<LoraAdapter> load_lora_adapters(const std::vector<std::string>& args, const ModelConfig& base,
                                            const std::string& base_path, int max_rank,
                                            std::vector<std::string>& warnings);

// The product and rows a target fills for this base (`fused` target names: qkv_proj, gate_up_proj).
struct LoraSlot {
  LoraProduct product = LoraProduct::kQkv;
  int64_t row_offset = 0;
  int64_t rows = 0;
  int64_t in_features = 0;
};

}  // namespace cbatch
