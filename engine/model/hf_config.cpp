// Parsing of Hugging Face config.json (LlamaConfig field names and defaults) with simdjson's DOM.
// Required: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size.
// Defaults as LlamaConfig: num_key_value_heads = heads, head_dim = hidden / heads, context 2048,
// rms_norm_eps 1e-6, rope_theta 10000, untied embeddings. A JSON null counts as absent.
#include "engine/model/hf_config.hpp"

#include "engine/core/error.hpp"
#include "engine/io/json_file.hpp"
#include "engine/model/model_formats.hpp"

namespace cbatch {
namespace {

RopeScaling read_rope_scaling(const JsonFields& fields) {
  RopeScaling s;
  if (!fields.has("rope_scaling")) return s;
  const JsonFields r = fields.object("rope_scaling");
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
  c.rope_scaling = read_rope_scaling(f);
  c.rope_layout = RopeLayout::kHalves;
  c.tied_embeddings = f.get_bool("tie_word_embeddings", false);
  check_model_config(c, path);
  return c;
}

}  // namespace

HfConfig read_hf_config(const std::string& path) {
  const JsonFile file(path);
  const JsonFields fields = file.fields();
  HfConfig hf;
  hf.config = read_model_config(fields, path);
  const std::vector<int32_t> bos = fields.get_ids("bos_token_id");
  if (bos.size() > 1) fields.fail("bos_token_id", "must be a single token id");
  hf.bos_id = bos.empty() ? -1 : bos[0];
  hf.eos_ids = fields.get_ids("eos_token_id");
  hf.torch_dtype = fields.get_string("torch_dtype", "");
  return hf;
}

}  // namespace cbatch
