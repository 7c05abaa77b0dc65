// Assembling a Hugging Face directory's tokenizer: tokenizer.json, then tokenizer_config.json's
// bos/eos tokens and add_bos_token / add_eos_token (they override the post-processor, as
// transformers' fast tokenizers do), the chat template (tokenizer_config.json or chat_template.jinja),
// and the eos ids of generation_config.json and config.json, which also stop generation (vLLM).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/text/hf_tokenizer.hpp"
#include "engine/base/json_file.hpp"
#include "engine/text/unigram_tokenizer.hpp"
#include "engine/text/wordpiece_tokenizer.hpp"

namespace cbatch {
namespace {

int32_t find_token(const BpeTokenizerSpec& spec, const std::string& text) {
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id] == text && spec.types[id] != TokenType::kUnused) return static_cast<int32_t>(id);
  }
  return -1;
}

// A special token written as "text" or as {"content": "text", ...}; "" when absent.
std::string token_text(const JsonFields& f, const char* key) {
  if (!f.has(key)) return "";
  if (f.at(key).is_object()) return f.object(key).get_string("content");
  return f.get_string(key);
}

// chat_template: a string, or a list of {"name", "template"} (the one named "default", else the first).
std::string chat_template_of(const JsonFields& f) {
  if (!f.has("chat_template")) return "";
  if (f.at("chat_template").is_string()) return f.get_string("chat_template");
  std::string first;
  size_t index = 0;
  for (simdjson::dom::element value : f.array("chat_template")) {
    const JsonFields entry = f.item("chat_template", index++, value);
    if (entry.get_string("name", "") == "default") return entry.get_string("template");
    if (first.empty()) first = entry.get_string("template");
  }
  return first;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct SpecialIds {
  std::string bos_text;
  std::vector<std::string> eos_texts;
  bool add_bos = false;
  bool add_eos = false;
};

void read_tokenizer_config(const std::string& path, SpecialIds& ids, std::string* chat_template) {
  const JsonFile file(path);
  const JsonFields f = file.fields();
  if (const std::string bos = token_text(f, "bos_token"); !bos.empty()) ids.bos_text = bos;
  if (const std::string eos = token_text(f, "eos_token"); !eos.empty()) ids.eos_texts.insert(ids.eos_texts.begin(), eos);
  ids.add_bos = f.get_bool("add_bos_token", ids.add_bos);
  ids.add_eos = f.get_bool("add_eos_token", ids.add_eos);
  *chat_template = chat_template_of(f);
}

void add_unique(std::vector<int32_t>& ids, const std::vector<int32_t>& more) {
  for (int32_t id : more) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
}

// generation_config.json (optional): more eos ids, and the bos id when nothing else named one.
void read_generation_config(const std::string& path, BpeTokenizerSpec& spec) {
  if (!std::filesystem::exists(path)) return;
  const JsonFile generation(path);
  add_unique(spec.eos_ids, generation.fields().get_ids("eos_token_id"));
  const std::vector<int32_t> bos = generation.fields().get_ids("bos_token_id");
  if (spec.bos_id < 0 && !bos.empty()) spec.bos_id = bos[0];
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir, int32_t config_bos_id,
                                             const std::vector<int32_t>& config_eos_ids, std::string* chat_template) {
  namespace fs = std::filesystem;
  const std::string json_path = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(json_path)) throw Error("'" + dir + "': a Hugging Face model directory needs tokenizer.json");
  if (is_wordpiece_json(json_path)) return load_wordpiece_tokenizer(json_path);  // BERT: no chat template
  if (is_unigram_json(json_path)) return load_unigram_tokenizer(json_path);      // XLM-R: likewise
  HfTokenizerJson json = read_tokenizer_json(json_path);
  BpeTokenizerSpec& spec = json.spec;
  SpecialIds ids{json.template_bos, {}, !json.template_bos.empty(), !json.template_eos.empty()};
  if (!json.template_eos.empty()) ids.eos_texts.push_back(json.template_eos);
  const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  chat_template->clear();
  if (fs::exists(config_path)) read_tokenizer_config(config_path, ids, chat_template);
  const std::string jinja_path = (fs::path(dir) / "chat_template.jinja").string();
  if (chat_template->empty() && fs::exists(jinja_path)) *chat_template = read_text_file(jinja_path);

  spec.bos_id = ids.bos_text.empty() ? config_bos_id : find_token(spec, ids.bos_text);
  if (!ids.bos_text.empty() && spec.bos_id < 0) {
    throw Error("'" + config_path + "': bos_token '" + elide(ids.bos_text) + "' is not a token of tokenizer.json");
  }
  for (const std::string& text : ids.eos_texts) {
    const int32_t id = find_token(spec, text);
    if (id < 0) throw Error("'" + config_path + "': eos_token '" + elide(text) + "' is not a token of tokenizer.json");
    add_unique(spec.eos_ids, {id});
  }
  read_generation_config((fs::path(dir) / "generation_config.json").string(), spec);
  add_unique(spec.eos_ids, config_eos_ids);
  spec.add_bos = ids.add_bos;
  spec.add_eos = ids.add_eos;
  return std::make_unique<BpeTokenizer>(std::move(spec), json_path);
}

}  // namespace cbatch
