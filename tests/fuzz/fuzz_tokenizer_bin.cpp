// Fuzz target: arbitrary bytes as a llama2.c tokenizer.bin (as many tokens as the file holds), then,
// if it loads, encoding and decoding a fixed text with it. Only cbatch::Error may come out.
#include "engine/base/error.hpp"
#include "engine/text/tokenizer_loaders.hpp"
#include "fuzz_support.hpp"

using namespace cbatch;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::MemFile file("tokenizer");
  try {
    const auto tokenizer = load_llama2c_tokenizer(file.write(data, size), 0);
    const std::vector<int32_t> ids = tokenizer->encode("I dreamed of a quiet city \xC3\xA9\xFF", true);
    for (int32_t id : ids) fuzz::require(id >= 0 && id < tokenizer->vocab_size(), "id in the vocabulary");
    tokenizer->decode(ids);
  } catch (const Error&) {
  }
  return 0;
}
