// load_model: picks the format from the path (dummy: prefix, a directory is Hugging Face, GGUF magic,
// else a llama2.c checkpoint), runs its loader and checks every tensor shape against the config
// (model_checks.cpp). The loaders never call back into this file.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/model/model_formats.hpp"

namespace cbatch {
namespace {

enum class Format { kDummy, kGguf, kLlama2c, kHf };

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
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0 ? Format::kGguf : Format::kLlama2c;
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

}  // namespace cbatch
