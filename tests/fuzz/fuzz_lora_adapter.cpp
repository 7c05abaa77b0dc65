// Fuzz target: arbitrary bytes as a LoRA adapter through load_lora_adapter, against one of four tiny bases
// (the model_file seeds llama.gguf, qwen3_5.gguf, lfm2.gguf and granite_h.gguf: RoPE rows, DeltaNet value
// heads, short convolutions, Mamba-2 projections). Byte 0 picks the base (mod 4), byte 1 the format: even, the
// rest is a llama.cpp GGUF LoRA file; odd, a PEFT directory, its two files framed as fuzz_support.hpp's
// split_two_files reads them (adapter_config.json, adapter_model.safetensors). A bad adapter must give cbatch::Error: any other exception, a crash, a sanitizer
// report or an allocation beyond libFuzzer's -malloc_limit_mb is a finding. An adapter that loads must hold
// pairs whose sizes are their shapes' and whose place in the base is the one its module resolves to.
#include <array>
#include <filesystem>

#include "engine/base/error.hpp"
#include "engine/model/lora_adapter.hpp"
#include "engine/model/lora_targets.hpp"
#include "engine/model/model.hpp"
#include "fuzz_support.hpp"

using namespace cbatch;
namespace fs = std::filesystem;

namespace {

constexpr int kMaxRank = 64;
constexpr size_t kNumBases = 4;

// The bases' configs, read once from the committed seeds.
const std::array<ModelConfig, kNumBases>& bases() {
  static const std::array<ModelConfig, kNumBases> configs = [] {
    std::array<ModelConfig, kNumBases> out;
    const fs::path seeds = fs::path(CBATCH_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "model_file";
    const char* names[] = {"llama.gguf", "qwen3_5.gguf", "lfm2.gguf", "granite_h.gguf"};
    for (size_t i = 0; i < out.size(); ++i) {
      ModelSource source;
      source.path = (seeds / names[i]).string();
      out[i] = load_model(source).config;
    }
    return out;
  }();
  return configs;
}

void check_pairs(const LoraAdapter& adapter, const ModelConfig& base, bool gguf) {
  for (const LoraPair& p : adapter.pairs) {
    fuzz::require(p.layer >= 0 && p.layer < base.num_layers, "pair layer within the base", p.module);
    fuzz::require(p.rank >= 1 && p.rank <= kMaxRank, "pair rank within 1..max_rank", p.module);
    fuzz::require(p.a.size() == static_cast<size_t>(p.rank * p.in_features), "A is (rank, in_features)", p.module);
    fuzz::require(p.b.size() == static_cast<size_t>(p.rows * p.rank), "B is (rows, rank)", p.module);
    const LoraTarget target = resolve_lora_target(p.module, p.layer, gguf, base);
    fuzz::require(target.product == p.product && target.row_offset == p.row_offset && target.rows == p.rows &&
                      target.in_features == p.in_features,
                  "pair placed where its module resolves", p.module);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::MemFile gguf_file("adapter.gguf");
  static const fuzz::MemDirectory peft("peft", {"adapter_config.json", "adapter_model.safetensors"});
  if (size < 2) return 0;
  const ModelConfig& base = bases()[data[0] % kNumBases];
  const bool is_peft = (data[1] & 1) != 0;
  LoraModuleArg arg;
  arg.name = "fuzz";
  if (is_peft) {
    fuzz::write_two_files(peft, data + 2, size - 2);
    arg.path = peft.path();
  } else {
    arg.path = gguf_file.write(data + 2, size - 2);
  }
  LoraAdapter adapter;
  try {
    adapter = load_lora_adapter(arg, base, kMaxRank);
  } catch (const Error&) {
    return 0;
  }
  check_pairs(adapter, base, !is_peft);  // outside the try: an error here is a finding
  return 0;
}
