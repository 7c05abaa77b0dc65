// Parsing of Hugging Face config.json (LlamaConfig field names and defaults) with simdjson's DOM.
// Required: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size.
// Defaults as LlamaConfig: num_key_value_heads = heads, head_dim = hidden / heads, context 2048,
// rms_norm_eps 1e-6, rope_theta 10000, untied embeddings. A JSON null counts as absent.
#include "engine/hf_config.hpp"

#include <simdjson.h>

#include "engine/error.hpp"
#include "engine/model_formats.hpp"

namespace cbatch {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Typed field access on one JSON object; messages name the file and the field.
class JsonFields {
 public:
  JsonFields(element object, std::string path, std::string prefix = "")
      : object_(object), path_(std::move(path)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const {
    element e;
    return !object_[key].get(e) && !e.is_null();
  }
  element at(const char* key) const {
    element e;
    if (object_[key].get(e) || e.is_null()) fail(key, "is missing");
    return e;
  }
  int64_t get_int(const char* key) const {
    int64_t v;
    if (at(key).get_int64().get(v)) fail(key, "must be an integer");
    return v;
  }
  int get_size(const char* key) const {
    const int64_t v = get_int(key);
    if (v <= 0 || v > INT32_MAX) fail(key, "must be a positive integer, got " + std::to_string(v));
    return static_cast<int>(v);
  }
  int get_size(const char* key, int fallback) const { return has(key) ? get_size(key) : fallback; }
  double get_number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const element e = at(key);
    if (e.is_double()) return e.get_double().value_unsafe();
    if (e.is_int64()) return static_cast<double>(e.get_int64().value_unsafe());
    if (e.is_uint64()) return static_cast<double>(e.get_uint64().value_unsafe());
    fail(key, "must be a number");
  }
  bool get_bool(const char* key, bool fallback) const {
    bool v = fallback;
    if (has(key) && at(key).get_bool().get(v)) fail(key, "must be true or false");
    return v;
  }
  std::string get_string(const char* key, const std::string& fallback) const {
    std::string_view v = fallback;
    if (has(key) && at(key).get_string().get(v)) fail(key, "must be a string");
    return std::string(v);
  }
  // An int or a list of ints (eos_token_id), empty when absent.
  std::vector<int32_t> get_ids(const char* key) const {
    std::vector<int32_t> ids;
    if (!has(key)) return ids;
    const element e = at(key);
    simdjson::dom::array items;
    if (e.get_array().get(items)) {
      ids.push_back(to_id(key, e));
    } else {
      for (element item : items) ids.push_back(to_id(key, item));
    }
    return ids;
  }
  [[noreturn]] void fail(const char* key, const std::string& problem) const {
    throw Error("'" + path_ + "': field '" + prefix_ + key + "' " + problem);
  }

 private:
  int32_t to_id(const char* key, element e) const {
    int64_t v;
    if (e.get_int64().get(v) || v < 0 || v > INT32_MAX) fail(key, "must hold non-negative integer token ids");
    return static_cast<int32_t>(v);
  }

  element object_;
  std::string path_;
  std::string prefix_;
};

RopeScaling read_rope_scaling(const JsonFields& fields, const std::string& path) {
  RopeScaling s;
  if (!fields.has("rope_scaling")) return s;
  const element e = fields.at("rope_scaling");
  if (!e.is_object()) fields.fail("rope_scaling", "must be an object or null");
  const JsonFields r(e, path, "rope_scaling.");
  const std::string type = r.get_string("rope_type", r.get_string("type", "default"));
  if (type == "default") return s;
  if (type != "llama3") r.fail("rope_type", "'" + type + "' is not supported (supported: llama3, default)");
  s.is_llama3 = true;
  s.factor = static_cast<float>(r.get_number("factor", 8.0));
  s.low_freq_factor = static_cast<float>(r.get_number("low_freq_factor", 1.0));
  s.high_freq_factor = static_cast<float>(r.get_number("high_freq_factor", 4.0));
  s.original_max_position = r.get_size("original_max_position_embeddings", 8192);
  if (!(s.factor >= 1.0f) || !(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0.0f)) {
    r.fail("factor", "and the frequency factors are invalid (need factor >= 1, 0 < low < high)");
  }
  return s;
}

ModelConfig read_model_config(const JsonFields& f, const std::string& path) {
  const std::string model_type = f.get_string("model_type", "llama");
  if (model_type != "llama" && model_type != "mistral") {
    f.fail("model_type", "'" + model_type + "' is not supported yet (supported: llama, mistral)");
  }
  ModelConfig c;
  c.architecture = "llama";
  c.dim = f.get_size("hidden_size");
  c.hidden_dim = f.get_size("intermediate_size");
  c.num_layers = f.get_size("num_hidden_layers");
  c.num_heads = f.get_size("num_attention_heads");
  c.num_kv_heads = f.get_size("num_key_value_heads", c.num_heads);
  c.head_dim = f.get_size("head_dim", c.dim / c.num_heads);
  c.vocab_size = f.get_size("vocab_size");
  c.max_context = f.get_size("max_position_embeddings", 2048);
  c.rms_eps = static_cast<float>(f.get_number("rms_norm_eps", 1e-6));
  c.rope_theta = static_cast<float>(f.get_number("rope_theta", 10000.0));
  c.rope_scaling = read_rope_scaling(f, path);
  c.rope_layout = RopeLayout::kHalves;
  c.tied_embeddings = f.get_bool("tie_word_embeddings", false);
  check_model_config(c, path);
  return c;
}

}  // namespace

HfConfig read_hf_config(const std::string& path) {
  simdjson::dom::parser parser;
  element doc;
  if (auto error = parser.load(path).get(doc)) {
    throw Error("cannot read config '" + path + "': " + simdjson::error_message(error));
  }
  if (!doc.is_object()) throw Error("'" + path + "': a config.json must hold a JSON object");
  const JsonFields fields(doc, path);
  HfConfig hf;
  hf.config = read_model_config(fields, path);
  const std::vector<int32_t> bos = fields.get_ids("bos_token_id");
  if (bos.size() > 1) fields.fail("bos_token_id", "must be a single token id");
  hf.bos_id = bos.empty() ? -1 : bos[0];
  hf.eos_ids = fields.get_ids("eos_token_id");
  return hf;
}

}  // namespace cbatch
