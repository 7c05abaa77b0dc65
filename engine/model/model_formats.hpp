// The per-format model loaders behind load_model (model_loader.cpp dispatches on the path; the checks
// they share are model_checks.hpp). Each loader fills every field of Model and throws cbatch::Error
// naming the file and the problem.
#pragma once
#include <string>

#include "engine/model/model.hpp"

namespace cbatch {

Model load_gguf_model(const ModelSource& source);     // gguf_model.cpp
Model load_llama2c_model(const ModelSource& source);  // llama2c_model.cpp
Model load_dummy_model(const ModelSource& source);    // dummy_model.cpp: source.path without "dummy:"
Model load_hf_model(const ModelSource& source);       // hf_model.cpp: a Hugging Face directory

// The tokenizer alone, for `cbatch tokenize` (a vocab-only GGUF is enough); *chat_template receives
// the model's chat template text where the format has one.
std::unique_ptr<Tokenizer> load_gguf_model_tokenizer(const std::string& path, std::string* chat_template);
std::unique_ptr<Tokenizer> load_hf_model_tokenizer(const std::string& dir, std::string* chat_template);
std::unique_ptr<Tokenizer> load_llama2c_model_tokenizer(const ModelSource& source);
std::unique_ptr<Tokenizer> load_dummy_model_tokenizer(const ModelSource& source);

}  // namespace cbatch
