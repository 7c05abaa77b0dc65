// tokenizer.json -> BpeTokenizerSpec. Supported: model BPE (vocab, merges as "a b" or [a, b],
// byte_fallback, ignore_merges, fuse_unk, unk_token); added_tokens (special -> control, else
// user-defined; lstrip / rstrip); normalizer NFC (Qwen2) / Prepend("▁") / Replace(" " -> "▁") /
// Sequence; pre-tokenizer ByteLevel, Split (the GPT-2, Llama 3, Qwen2, Qwen3.5 and o200k regexes,
// Isolated, on their scanners; any other regex or string, any behaviour, inverted or not, on PCRE2;
// Gemma's " " once spaces became "▁"), Digits, Metaspace (no prefix before a fragment that starts with
// "▁"), Sequence; post-processor TemplateProcessing (which special tokens go first and last), ByteLevel,
// Sequence.
#include "engine/base/error.hpp"
#include "engine/base/json_file.hpp"
#include "engine/text/hf_tokenizer.hpp"
#include "engine/text/regex_split.hpp"
#include "engine/text/token_table_json.hpp"

namespace cbatch {
namespace {

using simdjson::dom::element;


struct Components {
  bool byte_level = false;
  bool spaces_to_marker = false;  // Replace(" " -> "▁") or Metaspace: SentencePiece-style
};

// One merge, "left right" (older files) or ["left", "right"].
bool parse_merge(element merge, std::pair<std::string, std::string>* pair) {
  std::string_view text, left, right;
  if (!merge.get_string().get(text)) return split_merge(text, pair);
  simdjson::dom::array parts;
  if (merge.get_array().get(parts) || parts.size() != 2 || parts.at(0).get_string().get(left) ||
      parts.at(1).get_string().get(right)) {
    return false;
  }
  *pair = {std::string(left), std::string(right)};
  return true;
}

void read_merges(const JsonFields& model, BpeTokenizerSpec& spec) {
  for (element merge : model.array("merges")) {
    std::pair<std::string, std::string> pair;
    if (!parse_merge(merge, &pair)) {
      model.fail(("merges[" + std::to_string(spec.merges.size()) + "]").c_str(), "must be \"left right\" or [left, right]");
    }
    spec.merges.push_back(std::move(pair));
  }
}

void read_added_tokens(const JsonFields& root, BpeTokenizerSpec& spec) {
  read_json_added_tokens(root, spec.tokens, spec.types, [&](const JsonFields& t, int32_t id) {
    const WhitespaceStrip strip{t.get_bool("lstrip", false), t.get_bool("rstrip", false)};
    if (strip.left || strip.right) spec.strips.push_back({id, strip});
  });
}

void read_normalizer(const JsonFields& n, BpeTokenizerSpec& spec, Components& parts) {
  const std::string type = n.get_string("type");
  if (type == "Sequence") {
    size_t index = 0;
    for (element item : n.array("normalizers")) read_normalizer(n.item("normalizers", index++, item), spec, parts);
  } else if (type == "NFC") {
    spec.nfc = true;
  } else if (type == "Prepend" && n.get_string("prepend") == kSpaceMarker) {
    spec.space_prefix = SpacePrefix::kAlways;
  } else if (type == "Replace" && n.object("pattern").get_string("String", "") == " " &&
             n.get_string("content") == kSpaceMarker) {
    parts.spaces_to_marker = true;
  } else {
    n.fail("type", "'" + type + "' is not a normalizer cbatch supports (NFC, Prepend \"▁\", Replace \" \" by \"▁\", Sequence)");
  }
}

SplitBehavior read_split_behavior(const JsonFields& p) {
  static constexpr std::pair<std::string_view, SplitBehavior> kBehaviors[] = {
      {"Isolated", SplitBehavior::kIsolated}, {"Removed", SplitBehavior::kRemoved},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext}, {"Contiguous", SplitBehavior::kContiguous}};
  const std::string name = p.get_string("behavior");
  for (const auto& [known, behavior] : kBehaviors) {
    if (name == known) return behavior;
  }
  p.fail("behavior", "'" + name + "' is not a Split behavior (Isolated, Removed, MergedWithPrevious, MergedWithNext, "
                     "Contiguous)");
}

// A Split: a known family's regex, isolated, is its scanner; any other regex or string runs on PCRE2.
SplitRule read_split(const JsonFields& p) {
  const JsonFields pattern = p.object("pattern");
  const SplitBehavior behavior = read_split_behavior(p);
  const bool invert = p.get_bool("invert", false);
  const bool is_regex = pattern.has("Regex");
  const char* key = is_regex ? "Regex" : "String";
  const std::string text = pattern.get_string(key);
  if (is_regex && behavior == SplitBehavior::kIsolated && !invert) {
    if (const auto scanner = split_pattern_for_regex(text)) return *scanner;
  }
  try {
    const auto syntax = is_regex ? RegexSplitter::Syntax::kRegex : RegexSplitter::Syntax::kLiteral;
    return SplitRule(std::make_shared<const RegexSplitter>(text, syntax, behavior, invert));
  } catch (const Error& e) {
    pattern.fail(key, e.what());
  }
}

void read_pre_tokenizer(const JsonFields& p, BpeTokenizerSpec& spec, Components& parts, bool is_first) {
  const std::string type = p.get_string("type");
  std::vector<SplitRule> rules = spec.pre_tokenizer.rules();
  if (type == "Sequence") {
    size_t index = 0;
    for (element item : p.array("pretokenizers")) {
      read_pre_tokenizer(p.item("pretokenizers", index, item), spec, parts, is_first && index == 0);
      ++index;
    }
    return;
  }
  if (type == "ByteLevel") {
    parts.byte_level = true;
    spec.add_prefix_space = p.get_bool("add_prefix_space", false);
    if (spec.add_prefix_space && !is_first) p.fail("add_prefix_space", "is supported only on a first ByteLevel");
    if (p.get_bool("use_regex", true)) rules.push_back(SplitPattern::kGpt2);
  } else if (type == "Split" && parts.spaces_to_marker && p.object("pattern").get_string("String", "") == " ") {
    // Gemma: splitting on " " after a normalizer that replaced every space by "▁" splits nothing.
  } else if (type == "Split") {
    rules.push_back(read_split(p));
  } else if (type == "Digits") {
    rules.push_back(p.get_bool("individual_digits", false) ? SplitPattern::kIsolateDigits
                                                            : SplitPattern::kIsolateDigitRuns);
  } else if (type == "Metaspace") {
    const MetaspaceSpec m = read_metaspace(p);
    spec.space_prefix = m.space_prefix;
    spec.split_on_space_marker = m.split;
    spec.prefix_unless_space = true;
    parts.spaces_to_marker = true;
  } else {
    p.fail("type", "'" + type + "' is not a pre-tokenizer cbatch supports (ByteLevel, Split, Digits, Metaspace, Sequence)");
  }
  spec.pre_tokenizer = PreTokenizer(std::move(rules));
}

// TemplateProcessing "single": which special token comes before and after sequence A.
void read_post_processor(const JsonFields& p, HfTokenizerJson& out) {
  const std::string type = p.get_string("type");
  if (type == "Sequence") {
    size_t index = 0;
    for (element item : p.array("processors")) read_post_processor(p.item("processors", index++, item), out);
    return;
  }
  if (type == "ByteLevel") return;
  if (type != "TemplateProcessing") p.fail("type", "'" + type + "' is not a post-processor cbatch supports");
  bool seen_sequence = false;
  size_t index = 0;
  for (element value : p.array("single")) {
    const JsonFields piece = p.item("single", index++, value);
    if (piece.has("Sequence")) {
      seen_sequence = true;
    } else {
      std::string& slot = seen_sequence ? out.template_eos : out.template_bos;
      slot = piece.object("SpecialToken").get_string("id");
    }
  }
}

}  // namespace

HfTokenizerJson read_tokenizer_json(const std::string& path) {
  const JsonFile file(path);
  const JsonFields root = file.fields();
  HfTokenizerJson out;
  BpeTokenizerSpec& spec = out.spec;
  const JsonFields model = root.object("model");
  const std::string type = model.get_string("type", "BPE");
  if (type != "BPE") model.fail("type", "'" + type + "' is not supported (supported: BPE, WordPiece, Unigram)");
  read_json_vocab(model, spec.tokens, spec.types);
  read_merges(model, spec);
  read_added_tokens(root, spec);
  spec.model.byte_fallback = model.get_bool("byte_fallback", false);
  spec.model.ignore_merges = model.get_bool("ignore_merges", false);
  spec.model.fuse_unk = model.get_bool("fuse_unk", false);
  Components parts;
  if (root.has("normalizer")) read_normalizer(root.object("normalizer"), spec, parts);
  if (root.has("pre_tokenizer")) read_pre_tokenizer(root.object("pre_tokenizer"), spec, parts, true);
  if (root.has("post_processor")) read_post_processor(root.object("post_processor"), out);
  if (parts.byte_level == parts.spaces_to_marker) {
    root.fail("pre_tokenizer", parts.byte_level ? "mixes byte-level and SentencePiece-style (\"▁\") components"
                                                : "is neither byte-level (ByteLevel) nor SentencePiece-style "
                                                  "(Metaspace, or a normalizer that replaces \" \" by \"▁\")");
  }
  spec.is_byte_level = parts.byte_level;
  if (model.has("unk_token")) {
    const std::string unk = model.get_string("unk_token");
    for (size_t id = 0; id < spec.tokens.size() && spec.model.unk_id < 0; ++id) {
      if (spec.tokens[id] == unk) spec.model.unk_id = static_cast<int32_t>(id);
    }
    if (spec.model.unk_id < 0) model.fail("unk_token", "'" + unk + "' is not in the vocabulary");
  }
  return out;
}

}  // namespace cbatch
