// tokenizer.json -> WordPieceSpec. Supported: model WordPiece (vocab, unk_token, continuing_subword_prefix,
// max_input_chars_per_word); added_tokens (special -> control, else user-defined); normalizer
// BertNormalizer (strip_accents null follows lowercase, as `tokenizers` does) or none; pre-tokenizer
// BertPreTokenizer; post-processor TemplateProcessing ("single": the special tokens around sequence A;
// "pair": the items of a pair with their type ids, 0 then 1) or BertProcessing (cls, sep).
#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"
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

void read_template(const JsonFields& p, WordPieceSpec& spec) {
  bool seen_sequence = false;
  size_t index = 0;
  for (element value : p.array("single")) {
    const JsonFields piece = p.item("single", index++, value);
    if (piece.has("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const int32_t id = token_id(spec, piece, "SpecialToken", piece.object("SpecialToken").get_string("id"));
    (seen_sequence ? spec.suffix_ids : spec.prefix_ids).push_back(id);
  }
}

// "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, ...].
void read_pair_template(const JsonFields& p, WordPieceSpec& spec) {
  spec.pair_template.clear();
  size_t index = 0;
  int last_type = 0;
  for (element value : p.array("pair")) {
    const JsonFields piece = p.item("pair", index++, value);
    PairTemplateItem item;
    const JsonFields inner = piece.object(piece.has("Sequence") ? "Sequence" : "SpecialToken");
    if (piece.has("Sequence")) {
      const std::string id = inner.get_string("id");
      if (id != "A" && id != "B") inner.fail("id", "'" + id + "' is not a sequence (A or B)");
      item.sequence = id == "A" ? 0 : 1;
    } else {
      item.special_id = token_id(spec, piece, "SpecialToken", inner.get_string("id"));
    }
    item.type_id = static_cast<int>(inner.has("type_id") ? inner.get_int("type_id") : 0);
    if (item.type_id < last_type || item.type_id > 1) {
      inner.fail("type_id", "must run 0 then 1 through the pair template (cbatch joins two segments)");
    }
    last_type = item.type_id;
    spec.pair_template.push_back(item);
  }
}

// BertProcessing: "cls": ["[CLS]", 101], "sep": ["[SEP]", 102].
int32_t bert_processing_id(const JsonFields& p, const char* key) {
  simdjson::dom::array pair = p.array(key);
  int64_t id;
  if (pair.size() != 2 || pair.at(1).get_int64().get(id) || id < 0) p.fail(key, "must be [text, id]");
  return static_cast<int32_t>(id);
}

void read_post_processor(const JsonFields& p, WordPieceSpec& spec) {
  const std::string type = p.get_string("type");
  if (type == "TemplateProcessing") {
    read_template(p, spec);
    if (p.has("pair")) read_pair_template(p, spec);
  } else if (type == "BertProcessing") {
    const int32_t cls = bert_processing_id(p, "cls"), sep = bert_processing_id(p, "sep");
    spec.prefix_ids = {cls};
    spec.suffix_ids = {sep};
    spec.pair_template = {{cls, 0, 0}, {-1, 0, 0}, {sep, 0, 0}, {-1, 1, 1}, {sep, 0, 1}};
  } else {
    p.fail("type", "'" + type + "' is not a WordPiece post-processor cbatch supports (TemplateProcessing, BertProcessing)");
  }
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
  if (root.has("post_processor")) read_post_processor(root.object("post_processor"), spec);
  return std::make_unique<WordPieceTokenizer>(std::move(spec));
}

}  // namespace cbatch
