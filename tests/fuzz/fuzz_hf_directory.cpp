// Fuzz target: arbitrary bytes as a Hugging Face model directory through load_model. The input is framed
// as a little-endian uint16 n, then n bytes of config.json, then model.safetensors (n past the end: all of
// it is config.json, no weights). The directory's tokenizer.json and tokenizer_config.json are fixed (the
// byte-level BPE of the tiny test models, tests/fuzz/hf_tokenizer/). The config's sizes, families,
// quantization_config and the safetensors header and data (pre-quantized weights unpacked when viewed)
// must give cbatch::Error when they are wrong: any other exception, a crash, a sanitizer report or an
// allocation beyond libFuzzer's -malloc_limit_mb is a finding. A model that loads must have a usable
// tokenizer, and every weight must read whole (fuzz_tensors.hpp).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "engine/base/error.hpp"
#include "engine/model/model.hpp"
#include "fuzz_support.hpp"
#include "fuzz_tensors.hpp"

using namespace cbatch;
namespace fs = std::filesystem;

namespace {

// A directory whose config.json and model.safetensors link to in-memory files and whose tokenizer files
// are copies of the committed ones; removed at exit.
struct Directory {
  fuzz::MemFile config{"config.json"}, weights{"model.safetensors"};
  std::string path;

  Directory() {
    char name[] = "/tmp/cbatch-fuzz-hf-XXXXXX";
    if (mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = name;
    const fs::path tokenizer = fs::path(CBATCH_SOURCE_DIR) / "tests" / "fuzz" / "hf_tokenizer";
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(tokenizer / file, fs::path(path) / file);
    }
    fs::create_symlink(config.path(), fs::path(path) / "config.json");
    fs::create_symlink(weights.path(), fs::path(path) / "model.safetensors");
  }
  ~Directory() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Directory dir;
  size_t n = 0;
  if (size >= 2) n = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 2);
  const uint8_t* config = size >= 2 ? data + 2 : data;
  dir.config.write(config, n);
  dir.weights.write(config + n, size - std::min<size_t>(size, 2) - n);
  ModelSource source;
  source.path = dir.path;
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
