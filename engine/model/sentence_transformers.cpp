#include "engine/model/sentence_transformers.hpp"

#include <filesystem>

#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"

namespace cbatch {
namespace {

namespace fs = std::filesystem;

// 1_Pooling/config.json: exactly one of the modes cbatch has (mean, cls, last token).
Pooling read_pooling(const std::string& path) {
  const JsonFile file(path);
  const JsonFields f = file.fields();
  for (const char* unsupported : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"}) {
    if (f.get_bool(unsupported, false)) f.fail(unsupported, "is not a pooling cbatch supports (mean, cls, last token)");
  }
  const bool mean = f.get_bool("pooling_mode_mean_tokens", false);
  const bool cls = f.get_bool("pooling_mode_cls_token", false);
  const bool last = f.get_bool("pooling_mode_lasttoken", false);
  if (int(mean) + int(cls) + int(last) != 1) {
    f.fail("pooling_mode_mean_tokens", "and the other pooling_mode_* fields must choose exactly one pooling");
  }
  return mean ? Pooling::kMean : cls ? Pooling::kCls : Pooling::kLast;
}

}  // namespace

EmbeddingSpec read_sentence_transformers(const std::string& dir) {
  EmbeddingSpec spec;
  const fs::path modules_path = fs::path(dir) / "modules.json";
  if (!fs::exists(modules_path)) return spec;
  simdjson::dom::parser parser;  // modules.json is a list, not the object JsonFile reads
  simdjson::dom::array list;
  if (parser.load(modules_path.string()).get_array().get(list) != simdjson::SUCCESS) {
    throw Error("'" + modules_path.string() + "' must be a JSON list of modules");
  }
  for (simdjson::dom::element m : list) {
    std::string_view type, path;
    if (m["type"].get(type) != simdjson::SUCCESS) throw Error("'" + modules_path.string() + "': a module has no type");
    if (m["path"].get(path) != simdjson::SUCCESS) path = "";
    const std::string_view name = type.substr(type.rfind('.') + 1);
    if (name == "Transformer") continue;
    if (name == "Pooling") {
      spec.pooling = read_pooling((fs::path(dir) / std::string(path) / "config.json").string());
      spec.has_pooling = true;
    } else if (name == "Normalize") {
      spec.normalize = true;
    } else {
      throw Error("'" + modules_path.string() + "': module " + std::string(type) +
                  " is not supported (supported: Transformer, Pooling, Normalize)");
    }
  }
  const fs::path bert_config = fs::path(dir) / "sentence_bert_config.json";
  if (fs::exists(bert_config)) spec.max_seq_length = JsonFile(bert_config.string()).fields().get_size("max_seq_length", 0);
  const fs::path config = fs::path(dir) / "config.json";
  if (fs::exists(config)) {
    const JsonFile c(config.string());
    spec.matryoshka = c.fields().get_bool("is_matryoshka", false) || c.fields().has("matryoshka_dimensions");
  }
  return spec;
}

}  // namespace cbatch
