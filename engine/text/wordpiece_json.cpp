// tokenizer.json -> WordPieceSpec. Supported: model WordPiece (vocab, unk_token, continuing_subword_prefix,
// max_input_chars_per_word); added_tokens (special -> control, else user-defined); normalizer
// BertNormalizer (strip_accents null follows lowercase, as `tokenizers` does) or none; pre-tokenizer
// BertPreTokenizer; post-processor TemplateProcessing, BertProcessing or RobertaProcessing
// (pair_template.hpp).
#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"
#include "engine/text/pair_template.hpp"
#include "engine/text/token_table_json.hpp"
#include "engine/text/wordpiece_tokenizer.hpp"

namespace cbatch {
namespace {

using simdjson::dom::element;

void read_model(const JsonFields& model, WordPieceSpec& spec) {
  read_json_vocab(model, spec.tokens, spec.types);
  spec.continuing_prefix = model.get_string("continuing_subword_prefix", "##");
  spec.max_input_chars_per_word = model.get_size("max_input_chars_per_word", 100);
}

void read_normalizer(const JsonFields& n, WordPieceSpec& spec) {
  const std::string type = n.get_string("type");
  if (type != "BertNormalizer") n.fail("type", "'" + type + "' is not a WordPiece normalizer cbatch supports (BertNormalizer)");
  bert::NormalizerOptions& o = spec.normalizer;
  o.clean_text = n.get_bool("clean_text", true);
  o.handle_chinese_chars = n.get_bool("handle_chinese_chars", true);
  o.lowercase = n.get_bool("lowercase", true);
  o.strip_accents = n.get_bool("strip_accents", o.lowercase);
  spec.has_normalizer = true;
}

int32_t token_id(const WordPieceSpec& spec, const JsonFields& f, const char* key, const std::string& text) {
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id] == text && spec.types[id] != TokenType::kUnused) return static_cast<int32_t>(id);
  }
  f.fail(key, "names '" + text + "', which is not a token of the vocabulary");
}

void read_wordpiece_post_processor(const JsonFields& p, WordPieceSpec& spec) {
  PostProcessorSpec post;
  const SpecialIdOf id_of = [&spec](const JsonFields& f, const char* key, const std::string& text) {
    return token_id(spec, f, key, text);
  };
  read_post_processor(p, id_of, post);
  spec.prefix_ids = std::move(post.prefix_ids);
  spec.suffix_ids = std::move(post.suffix_ids);
  spec.pair_template = std::move(post.pair_template);
}

}  // namespace

bool is_wordpiece_json(const std::string& path) {
  const JsonFile file(path);
  const JsonFields root = file.fields();
  return root.has("model") && root.object("model").get_string("type", "") == "WordPiece";
}

std::unique_ptr<Tokenizer> load_wordpiece_tokenizer(const std::string& path) {
  const JsonFile file(path);
  const JsonFields root = file.fields();
  const JsonFields model = root.object("model");
  WordPieceSpec spec;
  read_model(model, spec);
  read_json_added_tokens(root, spec.tokens, spec.types);
  const std::string unk = model.get_string("unk_token", "[UNK]");
  spec.unk_id = token_id(spec, model, "unk_token", unk);
  if (root.has("normalizer")) read_normalizer(root.object("normalizer"), spec);
  const std::string pre = root.has("pre_tokenizer") ? root.object("pre_tokenizer").get_string("type") : "none";
  if (pre != "BertPreTokenizer") {
    root.fail("pre_tokenizer", "'" + pre + "' is not a WordPiece pre-tokenizer cbatch supports (BertPreTokenizer)");
  }
  if (root.has("post_processor")) read_wordpiece_post_processor(root.object("post_processor"), spec);
  return std::make_unique<WordPieceTokenizer>(std::move(spec));
}

}  // namespace cbatch
