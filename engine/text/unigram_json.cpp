// tokenizer.json -> UnigramTokenizerSpec. Supported: model Unigram (vocab as [piece, score] pairs, unk_id,
// byte_fallback); added_tokens (special -> control, else user-defined; lstrip / rstrip); normalizers
// Precompiled, NFC, Strip, Replace (a string, or the regex " {2,}" of the SentencePiece converters) and
// Sequence; pre-tokenizers Metaspace ("▁", prepend_scheme, split), WhitespaceSplit and Sequence;
// post-processors TemplateProcessing and RobertaProcessing (pair_template.hpp). Anything else is an error
// naming the field, not an approximation.
#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"
#include "engine/text/token_table_json.hpp"
#include "engine/text/unigram_tokenizer.hpp"

namespace cbatch {
namespace {

using simdjson::dom::element;

constexpr int64_t kMaxPieces = 1 << 22;

void read_vocab(const JsonFields& model, UnigramTokenizerSpec& spec) {
  size_t index = 0;
  for (element entry : model.array("vocab")) {
    simdjson::dom::array pair;
    std::string_view piece;
    double score = 0;  // simdjson reads integer scores as doubles too
    if (entry.get_array().get(pair) || pair.size() != 2 || pair.at(0).get_string().get(piece) ||
        pair.at(1).get_double().get(score)) {
      model.fail(("vocab[" + std::to_string(index) + "]").c_str(), "must be [piece, score]");
    }
    spec.model.pieces.emplace_back(piece);
    spec.model.scores.push_back(score);
    if (static_cast<int64_t>(++index) > kMaxPieces) model.fail("vocab", "has more than 2^22 pieces");
  }
  if (index == 0) model.fail("vocab", "is empty");
  spec.types.assign(index, TokenType::kNormal);
  if (model.has("unk_id")) {
    const int64_t unk = model.get_int("unk_id");
    if (unk < 0 || unk >= static_cast<int64_t>(index)) model.fail("unk_id", "= " + std::to_string(unk) + " is outside the vocabulary");
    spec.model.unk_id = static_cast<int32_t>(unk);
  }
  spec.model.byte_fallback = model.get_bool("byte_fallback", false);
}

// The tokenizer's table: the model's pieces, then added_tokens (which the model never chooses).
void read_added_tokens(const JsonFields& root, UnigramTokenizerSpec& spec) {
  spec.tokens = spec.model.pieces;
  read_json_added_tokens(root, spec.tokens, spec.types, [&](const JsonFields& t, int32_t id) {
    const WhitespaceStrip strip{t.get_bool("lstrip", false), t.get_bool("rstrip", false)};
    if (strip.left || strip.right) spec.strips.push_back({id, strip});
  });
}

void read_normalizer(const JsonFields& n, UnigramTokenizerSpec& spec, const std::string& path) {
  const std::string type = n.get_string("type");
  TextNormalizer step;
  if (type == "Sequence") {
    size_t index = 0;
    for (element item : n.array("normalizers")) read_normalizer(n.item("normalizers", index++, item), spec, path);
    return;
  } else if (type == "NFC") {
    step.kind = TextNormalizer::Kind::kNfc;
  } else if (type == "Strip") {
    step.kind = TextNormalizer::Kind::kStrip;
    step.left = n.get_bool("strip_left", true);
    step.right = n.get_bool("strip_right", true);
  } else if (type == "Replace") {
    const JsonFields pattern = n.object("pattern");
    step.to = n.get_string("content");
    if (pattern.has("String")) {
      step.kind = TextNormalizer::Kind::kReplace;
      step.from = pattern.get_string("String");
    } else if (pattern.get_string("Regex", "") == " {2,}") {
      step.kind = TextNormalizer::Kind::kCollapseSpaces;
    } else {
      pattern.fail("Regex", "is not a pattern cbatch supports (a String, or the regex \" {2,}\")");
    }
  } else if (type == "Precompiled") {
    std::string blob;
    if (!decode_base64(n.get_string("precompiled_charsmap"), &blob)) n.fail("precompiled_charsmap", "is not base64");
    step.kind = TextNormalizer::Kind::kPrecompiled;
    step.charsmap = std::make_shared<PrecompiledCharsmap>(blob, "'" + path + "': normalizer");
  } else {
    n.fail("type", "'" + type + "' is not a Unigram normalizer cbatch supports (Precompiled, NFC, Strip, Replace, Sequence)");
  }
  spec.normalizers.push_back(std::move(step));
}

void read_pre_tokenizer(const JsonFields& p, UnigramTokenizerSpec& spec) {
  const std::string type = p.get_string("type");
  if (type == "Sequence") {
    size_t index = 0;
    for (element item : p.array("pretokenizers")) read_pre_tokenizer(p.item("pretokenizers", index++, item), spec);
  } else if (type == "WhitespaceSplit" && !spec.metaspace) {
    spec.whitespace_split = true;
  } else if (type == "Metaspace") {
    const MetaspaceSpec m = read_metaspace(p);
    spec.space_prefix = m.space_prefix;
    spec.split_on_space_marker = m.split;
    spec.metaspace = true;
  } else {
    p.fail("type", "'" + type + "' is not a Unigram pre-tokenizer cbatch supports (Metaspace, a WhitespaceSplit "
                                "before it, Sequence)");
  }
}

int32_t special_id(const UnigramTokenizerSpec& spec, const JsonFields& f, const char* key, const std::string& text) {
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id] == text && spec.types[id] != TokenType::kUnused) return static_cast<int32_t>(id);
  }
  f.fail(key, "names '" + text + "', which is not a token of the vocabulary");
}

}  // namespace

bool is_unigram_json(const std::string& path) {
  const JsonFile file(path);
  const JsonFields root = file.fields();
  return root.has("model") && root.object("model").get_string("type", "") == "Unigram";
}

std::unique_ptr<Tokenizer> load_unigram_tokenizer(const std::string& path) {
  const JsonFile file(path);
  const JsonFields root = file.fields();
  UnigramTokenizerSpec spec;
  read_vocab(root.object("model"), spec);
  read_added_tokens(root, spec);
  if (root.has("normalizer")) read_normalizer(root.object("normalizer"), spec, path);
  if (root.has("pre_tokenizer")) read_pre_tokenizer(root.object("pre_tokenizer"), spec);
  if (spec.whitespace_split && !spec.metaspace) root.fail("pre_tokenizer", "has WhitespaceSplit without Metaspace");
  if (root.has("post_processor")) {
    const SpecialIdOf id_of = [&spec](const JsonFields& f, const char* key, const std::string& text) {
      return special_id(spec, f, key, text);
    };
    read_post_processor(root.object("post_processor"), id_of, spec.post);
  }
  return std::make_unique<UnigramTokenizer>(std::move(spec));
}

}  // namespace cbatch
