// load_model: picks the format from the path (dummy: prefix, a directory is Hugging Face, GGUF magic,
// else a llama2.c checkpoint, unless the name ends in .gguf or the file is shorter than its header), runs its loader and checks every tensor shape against the config
// (model_checks.cpp). The loaders never call back into this file. take_tensors hands the weights on to a backend.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/model/model_formats.hpp"

namespace cbatch {
namespace {

enum class Format { kDummy, kGguf, kLlama2c, kHf };

constexpr uintmax_t kLlama2cHeaderBytes = 7 * 4;  // seven int32: dim, hidden, layers, heads, kv heads, vocab, seq

Format detect_format(const std::string& path) {
  if (path.rfind("dummy:", 0) == 0) return Format::kDummy;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) throw Error("model '" + elide(path) + "' does not exist");
  if (std::filesystem::is_directory(status)) return Format::kHf;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open model '" + elide(path) + "'");
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return Format::kGguf;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) throw Error("model '" + elide(path) + "' is an empty file");
  if (std::filesystem::path(path).extension() == ".gguf") {
    throw Error("model '" + elide(path) + "' is not a GGUF file: it does not start with the GGUF magic bytes");
  }
  if (size < kLlama2cHeaderBytes) {
    throw Error("model '" + elide(path) + "' (" + std::to_string(size) +
                " bytes) is neither a GGUF file, a Hugging Face directory nor a llama2.c checkpoint");
  }
  return Format::kLlama2c;
}

}  // namespace

Model load_model(const ModelSource& source) {
  Model model;
  switch (detect_format(source.path)) {
    case Format::kDummy:
      model = load_dummy_model(source);
      break;
    case Format::kGguf:
      model = load_gguf_model(source);
      break;
    case Format::kLlama2c:
      model = load_llama2c_model(source);
      break;
    case Format::kHf:
      model = load_hf_model(source);
      break;
  }
  validate_model_tensors(model);
  return model;
}

std::unique_ptr<Tokenizer> load_tokenizer(const ModelSource& source, std::string* chat_template) {
  std::string unused;
  std::string& text = chat_template ? *chat_template : unused;
  text.clear();
  switch (detect_format(source.path)) {
    case Format::kDummy:
      return load_dummy_model_tokenizer(source);
    case Format::kGguf:
      return load_gguf_model_tokenizer(source.path, &text);
    case Format::kLlama2c:
      return load_llama2c_model_tokenizer(source);
    case Format::kHf:
      return load_hf_model_tokenizer(source.path, &text);
  }
  return nullptr;
}

const ModelTensors& expect_tensors(const Model& model) {
  if (model.tensors_taken) throw Error("internal error: the model's tensors were handed to a backend already");
  return model.tensors;
}

ModelTensors take_tensors(Model& model) {
  expect_tensors(model);
  ModelTensors tensors = std::move(model.tensors);
  model.tensors = ModelTensors{};
  model.tensors_taken = true;
  return tensors;
}

}  // namespace cbatch
