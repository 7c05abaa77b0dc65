// Corrupt and truncated model files give cbatch::Error naming the file, never a crash, another
// exception type or a giant allocation: llama2.c headers with extreme values, tokenizer.bin and GGUF
// headers cut at every few bytes, random byte flips in tokenizer.bin. (The fuzz targets in tests/fuzz
// explore further; these sweeps run in every test build, under the sanitizers in CI.) The files are
// tiny-spm's (tools/tiny_spm/make_tiny_spm.py).
#include <doctest/doctest.h>

#include <climits>
#include <cstring>
#include <random>

#include "engine/model/gguf.hpp"
#include "engine/model/model.hpp"
#include "engine/text/tokenizer_loaders.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;
using test::TempFile;

std::string bin_path() { return test::tiny_spm_path("tiny-spm.bin"); }
std::string tokenizer_path() { return test::tiny_spm_path("tokenizer.bin"); }
std::string gguf_path() { return test::tiny_spm_path("tiny-spm.gguf"); }

// Loads `bytes` as a model (with the real tokenizer.bin for llama2.c files); "" when it loads and
// its tokenizer works, else the cbatch::Error message. Any other exception fails the test.
std::string load_message(const TempFile& file, const std::string& bytes) {
  file.write(bytes);
  try {
    const Model model = load_model(ModelSource{file.path(), tokenizer_path(), 0});
    const std::vector<int32_t> ids = model.tokenizer->encode("I dreamed of a quiet city", true);
    for (int32_t id : ids) REQUIRE(id < model.config.vocab_size);
    model.tokenizer->decode(ids);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("llama2.c header fields at extreme values are errors naming the file") {
  const std::string original = test::read_bytes(bin_path());
  const TempFile file(original);
  for (int field = 0; field < 7; ++field) {
    for (int32_t value : {0, -1, 1, INT32_MIN, INT32_MAX, 1 << 20, -(1 << 20)}) {
      std::string bytes = original;
      int32_t old_value;
      std::memcpy(&old_value, &bytes[4 * field], 4);
      if (value == old_value) continue;
      std::memcpy(&bytes[4 * field], &value, 4);
      CAPTURE(field);
      CAPTURE(value);
      const std::string message = load_message(file, bytes);
      CHECK(message.find(file.path()) != std::string::npos);
    }
  }
}

TEST_CASE("tokenizer.bin cut anywhere is an error naming the file") {
  const std::string original = test::read_bytes(tokenizer_path());
  const TempFile file(original);
  for (size_t cut = 0; cut < original.size(); cut += cut < 64 ? 1 : 41) {
    file.write(original.substr(0, cut));
    CAPTURE(cut);
    CHECK(error_of([&] { load_llama2c_tokenizer(file.path(), 512); }).find(file.path()) != std::string::npos);
  }
}

TEST_CASE("tokenizer.bin with random byte flips loads into a working tokenizer or is an error") {
  const std::string original = test::read_bytes(tokenizer_path());
  const TempFile file(original);
  std::mt19937 rng(77);
  int num_errors = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::string bytes = original;
    for (int flips = 0; flips < 4; ++flips) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    file.write(bytes);
    try {
      const auto tokenizer = load_llama2c_tokenizer(file.path(), trial % 2 == 0 ? 512 : 0);
      const std::vector<int32_t> ids = tokenizer->encode("I dreamed of a quiet city \xC3\xA9", true);
      for (int32_t id : ids) REQUIRE((id >= 0 && id < tokenizer->vocab_size()));
      tokenizer->decode(ids);
    } catch (const Error&) {
      ++num_errors;
    }
  }
  CHECK(num_errors > 0);
}

TEST_CASE("GGUF cut anywhere in its header is an error naming the file") {
  const std::string path = gguf_path();
  const std::string original = test::read_bytes(path);
  const size_t header_bytes = GgufFile(path).data_offset();
  const TempFile file(original, ".gguf");
  for (size_t cut = 0; cut < header_bytes + 64; cut += cut < 64 ? 1 : 97) {
    CAPTURE(cut);
    CHECK(load_message(file, original.substr(0, cut)).find(file.path()) != std::string::npos);
  }
}

TEST_CASE("an empty file, a .gguf without the magic and a file shorter than a llama2.c header say what they are") {
  const TempFile gguf("", ".gguf");
  CHECK(load_message(gguf, "") == "model '" + gguf.path() + "' is an empty file");
  CHECK(load_message(gguf, "GGU") == "model '" + gguf.path() + "' is not a GGUF file: it does not start with the GGUF magic bytes");
  CHECK(load_message(gguf, std::string(64, 'x')) ==
        "model '" + gguf.path() + "' is not a GGUF file: it does not start with the GGUF magic bytes");
  const TempFile bin("", ".bin");
  CHECK(load_message(bin, "") == "model '" + bin.path() + "' is an empty file");
  CHECK(load_message(bin, "abcd") == "model '" + bin.path() +
                                         "' (4 bytes) is neither a GGUF file, a Hugging Face directory nor a llama2.c checkpoint");
}

}  // namespace cbatch
