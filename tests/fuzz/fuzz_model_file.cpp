// Fuzz target: arbitrary bytes as a model file through load_model, which picks the format by the GGUF
// magic (else a llama2.c checkpoint, read with a fixed valid tokenizer.bin). A corrupt or truncated
// file must give cbatch::Error: any other exception, a crash, a sanitizer report or an allocation
// beyond libFuzzer's -malloc_limit_mb is a finding. A model that loads must have a usable tokenizer, and
// every weight must read whole (fuzz_tensors.hpp).
#include "engine/base/error.hpp"
#include "engine/model/model.hpp"
#include "fuzz_support.hpp"
#include "fuzz_tensors.hpp"

using namespace cbatch;

namespace {

// A tokenizer.bin of 8 tokens (the vocab of the llama2.c seeds): max_token_length, then score, length,
// bytes per token.
std::string tokenizer_bin() {
  std::string bytes(4, '\0');
  bytes[0] = 4;
  float score = 0;
  for (const char* piece : {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", " a", "ab"}) {
    const int32_t length = static_cast<int32_t>(std::string_view(piece).size());
    bytes.append(reinterpret_cast<const char*>(&score), 4);
    bytes.append(reinterpret_cast<const char*>(&length), 4);
    bytes += piece;
    score -= 1;
  }
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::MemFile model_file("model"), tokenizer_file("tokenizer");
  static const std::string tokenizer_path = [] {
    const std::string bytes = tokenizer_bin();
    return tokenizer_file.write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }();
  ModelSource source;
  source.path = model_file.write(data, size);
  source.tokenizer_path = tokenizer_path;
  try {
    const Model model = load_model(source);
    fuzz::read_every_tensor(model);
    const std::vector<int32_t> ids = model.tokenizer->encode("ab a", true);
    for (int32_t id : ids) fuzz::require(id >= 0 && id < model.config.vocab_size, "token id within vocab_size");
    model.tokenizer->decode(ids);
  } catch (const Error&) {
  }
  return 0;
}
