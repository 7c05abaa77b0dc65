// Fuzz target: arbitrary bytes as a Hugging Face model directory through load_model. The input is its
// config.json and model.safetensors, framed as fuzz_support.hpp's split_two_files reads them (a little-endian
// uint16 n, n bytes of config.json, the rest model.safetensors). The directory's tokenizer.json and tokenizer_config.json are fixed (the
// byte-level BPE of the tiny test models, tests/fuzz/hf_tokenizer/). The config's sizes, families,
// quantization_config and the safetensors header and data (pre-quantized weights unpacked when viewed)
// must give cbatch::Error when they are wrong: any other exception, a crash, a sanitizer report or an
// allocation beyond libFuzzer's -malloc_limit_mb is a finding. A model that loads must have a usable
// tokenizer, and every weight must read whole (fuzz_tensors.hpp).
#include <filesystem>

#include "engine/base/error.hpp"
#include "engine/model/model.hpp"
#include "fuzz_support.hpp"
#include "fuzz_tensors.hpp"

using namespace cbatch;
namespace fs = std::filesystem;

namespace {

// config.json and model.safetensors in memory, beside copies of the committed tokenizer files.
const fuzz::MemDirectory& directory() {
  static const fuzz::MemDirectory dir("hf", {"config.json", "model.safetensors"});
  static const bool tokenizer_copied = [] {
    const fs::path tokenizer = fs::path(CBATCH_SOURCE_DIR) / "tests" / "fuzz" / "hf_tokenizer";
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(tokenizer / file, fs::path(dir.path()) / file);
    }
    return true;
  }();
  (void)tokenizer_copied;
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::MemDirectory& dir = directory();
  fuzz::write_two_files(dir, data, size);
  ModelSource source;
  source.path = dir.path();
  try {
    const Model model = load_model(source);
    fuzz::read_every_tensor(model);
    const std::vector<int32_t> ids = model.tokenizer->encode("ab a", true);
    for (int32_t id : ids) fuzz::require(id >= 0, "token id non-negative");
    model.tokenizer->decode(ids);
  } catch (const Error&) {
  }
  return 0;
}
