// The tokenizer of a GGUF file, from its tokenizer.ggml.* metadata: tokens, scores or merges, token
// types, special token ids and the add_bos / add_eos / add_space_prefix flags (llama.cpp's defaults
// when absent). "llama" is SentencePiece BPE (scores); "gpt2" is byte-level BPE (merges) whose
// pre-tokenizer tokenizer.ggml.pre names; "gemma4" is SentencePiece-style BPE (merges). End-of-generation tokens: eos, eot and eom ids, plus the
// control tokens llama.cpp recognizes by their text ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", ...).
// Three families' SentencePiece vocabularies need rules the metadata does not state, as their
// tokenizer.json files (and transformers' or llama.cpp's GGUF readers) apply them: Gemma's, Phi-3's and
// Mistral v3's, see below.
#include <cctype>

#include "engine/text/bpe_tokenizer.hpp"
#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"
#include "engine/text/spm_tokenizer.hpp"
#include "engine/model/gguf_tokenizer.hpp"

namespace cbatch {
namespace {

// Types when the file has no tokenizer.ggml.token_type: <0xNN> pieces are bytes, specials control.
TokenType guess_type(const SpmVocab& vocab, size_t id) {
  uint8_t byte = 0;
  if (parse_byte_piece(vocab.pieces[id], &byte)) return TokenType::kByte;
  if (static_cast<int32_t>(id) == vocab.unk_id) return TokenType::kUnknown;
  if (static_cast<int32_t>(id) == vocab.bos_id || static_cast<int32_t>(id) == vocab.eos_id) {
    return TokenType::kControl;
  }
  return TokenType::kNormal;
}

std::vector<TokenType> read_types(const GgufFile& gguf, size_t num_tokens) {
  std::vector<TokenType> types;
  if (!gguf.find("tokenizer.ggml.token_type")) return types;
  for (int64_t type : gguf.get_ints("tokenizer.ggml.token_type")) {
    if (type < 1 || type > 6) {
      throw Error("'" + gguf.path() + "': tokenizer.ggml.token_type holds unknown type " + std::to_string(type));
    }
    types.push_back(static_cast<TokenType>(type));
  }
  if (types.size() != num_tokens) {
    throw Error("'" + gguf.path() + "': tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                " entries for " + std::to_string(num_tokens) + " tokens");
  }
  return types;
}

void read_scores_and_types(const GgufFile& gguf, SpmVocab& vocab) {
  const size_t n = vocab.pieces.size();
  if (gguf.find("tokenizer.ggml.scores")) {
    const std::vector<double>& scores = gguf.get_floats("tokenizer.ggml.scores");
    vocab.scores.assign(scores.begin(), scores.end());
  } else {
    vocab.scores.assign(n, 0.0f);
  }
  vocab.types = read_types(gguf, n);
  if (vocab.types.empty()) {
    for (size_t id = 0; id < n; ++id) vocab.types.push_back(guess_type(vocab, id));
  }
}

int32_t token_id(const GgufFile& gguf, const char* key, int64_t fallback) {
  const int64_t id = gguf.get_int(key, fallback);
  if (id < -1 || id > INT32_MAX) {
    throw Error("'" + gguf.path() + "': " + key + " = " + std::to_string(id) + " is not a token id");
  }
  return static_cast<int32_t>(id);
}

std::vector<int32_t> extra_eos_ids(const GgufFile& gguf) {
  std::vector<int32_t> ids;
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (gguf.find(key)) ids.push_back(token_id(gguf, key, -1));
  }
  return ids;
}

bool contains_any(const std::string& text, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    if (text.find(part) != std::string::npos) return true;
  }
  return false;
}

// Gemma: user-defined runs of spaces are stored as real spaces ("  ") but are SentencePiece pieces
// "▁▁" that merge like any other (so "▁ " in the text also becomes one), and the merge order is the
// order of the tokens in the file, which the scores of these user-defined runs (-1000) do not follow.
void apply_gemma_rules(SpmVocab& vocab) {
  for (size_t id = 0; id < vocab.pieces.size(); ++id) {
    std::string& piece = vocab.pieces[id];
    if (vocab.types[id] == TokenType::kUserDefined && piece.find_first_not_of(' ') == std::string::npos) {
      std::string marked;
      for (size_t i = 0; i < piece.size(); ++i) marked += "\xE2\x96\x81";
      piece = marked;
      vocab.types[id] = TokenType::kNormal;
    }
    vocab.scores[id] = -static_cast<float>(id);
  }
}

// Phi-3's tokenizer.json gives its special tokens rstrip (the whitespace after "<|user|>" or "<|end|>"
// is dropped), except <unk>, <s> and <|endoftext|>; llama.cpp sets the same for a model it knows by
// general.name, cbatch also by the architecture.
void apply_phi3_rules(SpmVocab& vocab) {
  for (size_t id = 0; id < vocab.pieces.size(); ++id) {
    const std::string& piece = vocab.pieces[id];
    const bool is_special = vocab.types[id] == TokenType::kControl || vocab.types[id] == TokenType::kUserDefined;
    if ((is_special || piece == "</s>") && piece != "<unk>" && piece != "<s>" && piece != "<|endoftext|>") {
      vocab.strips.push_back({static_cast<int32_t>(id), WhitespaceStrip{false, true}});
    }
  }
}

// Mistral's v3 tokenizer (Mistral 7B v0.3, Mixtral 8x22B, Codestral: "[INST]" is one of its tokens)
// is published as a tokenizer.json whose Metaspace prefixes only the text's first fragment, so
// "[INST] Hi" is "[INST]", "▁Hi" as in mistral-common, where llama.cpp would give "▁▁Hi".
bool is_mistral_v3(const SpmVocab& vocab) {
  for (size_t id = 0; id < vocab.pieces.size() && id < 1024; ++id) {
    const bool is_special = vocab.types[id] == TokenType::kControl || vocab.types[id] == TokenType::kUserDefined;
    if (is_special && vocab.pieces[id] == "[INST]") return true;
  }
  return false;
}

void apply_family_rules(const GgufFile& gguf, SpmVocab& vocab) {
  const std::string arch = gguf.get_string("general.architecture", "");
  std::string name = gguf.get_string("general.name", "");
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (arch == "gemma" || arch == "gemma2" || arch == "gemma3") apply_gemma_rules(vocab);
  if (arch == "phi3" || contains_any(name, {"phi-3", "phi3"})) apply_phi3_rules(vocab);
  if (is_mistral_v3(vocab)) vocab.space_prefix_first_only = true;
}

std::unique_ptr<Tokenizer> load_spm(const GgufFile& gguf) {
  SpmVocab vocab;
  vocab.pieces = gguf.get_strings("tokenizer.ggml.tokens");
  vocab.unk_id = token_id(gguf, "tokenizer.ggml.unknown_token_id", 0);
  vocab.bos_id = token_id(gguf, "tokenizer.ggml.bos_token_id", 1);
  vocab.eos_id = token_id(gguf, "tokenizer.ggml.eos_token_id", 2);
  vocab.extra_eos_ids = extra_eos_ids(gguf);
  vocab.add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token", true);
  vocab.add_eos = gguf.get_bool("tokenizer.ggml.add_eos_token", false);
  vocab.add_space_prefix = gguf.get_bool("tokenizer.ggml.add_space_prefix", true);
  read_scores_and_types(gguf, vocab);
  for (int32_t id : end_of_generation_ids(vocab.pieces, vocab.types)) vocab.extra_eos_ids.push_back(id);
  apply_family_rules(gguf, vocab);
  return std::make_unique<SpmTokenizer>(std::move(vocab), gguf.path());
}

std::vector<std::pair<std::string, std::string>> read_merges(const GgufFile& gguf) {
  const std::vector<std::string>& lines = gguf.get_strings("tokenizer.ggml.merges");
  std::vector<std::pair<std::string, std::string>> merges(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!split_merge(lines[i], &merges[i])) {
      throw Error("'" + gguf.path() + "': tokenizer.ggml.merges[" + std::to_string(i) + "] = '" + elide(lines[i]) +
                  "' is not two tokens separated by a space");
    }
  }
  return merges;
}

std::unique_ptr<Tokenizer> load_byte_level(const GgufFile& gguf) {
  const std::string pre = gguf.get_string("tokenizer.ggml.pre", "default");
  const auto rules = split_rules_for_pre(pre);
  if (!rules) {
    throw Error("'" + gguf.path() + "': tokenizer.ggml.pre '" + elide(pre) + "' is not a pre-tokenizer cbatch knows (" +
                known_pre_names() + ")");
  }
  const bool is_llama3 = rules->size() == 1 && rules->front().pattern == SplitPattern::kLlama3;
  BpeTokenizerSpec spec;
  spec.tokens = gguf.get_strings("tokenizer.ggml.tokens");
  spec.types = read_types(gguf, spec.tokens.size());
  if (spec.types.empty()) spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.merges = read_merges(gguf);
  spec.is_byte_level = true;
  spec.pre_tokenizer = PreTokenizer(*rules);
  spec.model.ignore_merges = is_llama3;  // llama.cpp: Llama 3 vocabularies take whole-word tokens
  spec.model.unk_id = token_id(gguf, "tokenizer.ggml.unknown_token_id", -1);
  spec.bos_id = token_id(gguf, "tokenizer.ggml.bos_token_id", -1);
  spec.eos_ids = {token_id(gguf, "tokenizer.ggml.eos_token_id", -1)};
  for (int32_t id : extra_eos_ids(gguf)) spec.eos_ids.push_back(id);
  for (int32_t id : end_of_generation_ids(spec.tokens, spec.types)) spec.eos_ids.push_back(id);
  spec.add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token", is_llama3 && spec.bos_id >= 0);
  spec.add_eos = gguf.get_bool("tokenizer.ggml.add_eos_token", false);
  // tokenizer.ggml.add_space_prefix is ignored here, as llama.cpp ignores it for BPE vocabularies.
  return std::make_unique<BpeTokenizer>(std::move(spec), gguf.path());
}

// "gemma4": SentencePiece-style BPE from a tokenizer.json (llama.cpp's converter copies its tokens and
// merges): spaces become "▁" with no prefix, BPE merges run over each whole fragment between special
// tokens (Hugging Face runs it without a pre-tokenizer), characters without a token fall back to bytes.
std::unique_ptr<Tokenizer> load_spm_bpe(const GgufFile& gguf) {
  BpeTokenizerSpec spec;
  spec.tokens = gguf.get_strings("tokenizer.ggml.tokens");
  spec.types = read_types(gguf, spec.tokens.size());
  if (spec.types.empty()) {
    for (const std::string& token : spec.tokens) {
      uint8_t byte = 0;
      spec.types.push_back(parse_byte_piece(token, &byte) ? TokenType::kByte : TokenType::kNormal);
    }
  }
  spec.merges = read_merges(gguf);
  spec.is_byte_level = false;
  const bool space_prefix = gguf.get_bool("tokenizer.ggml.add_space_prefix", false);
  spec.space_prefix = space_prefix ? SpacePrefix::kAlways : SpacePrefix::kNone;
  spec.model.byte_fallback = true;
  spec.model.unk_id = token_id(gguf, "tokenizer.ggml.unknown_token_id", -1);
  spec.bos_id = token_id(gguf, "tokenizer.ggml.bos_token_id", -1);
  spec.eos_ids = {token_id(gguf, "tokenizer.ggml.eos_token_id", -1)};
  for (int32_t id : extra_eos_ids(gguf)) spec.eos_ids.push_back(id);
  for (int32_t id : end_of_generation_ids(spec.tokens, spec.types)) spec.eos_ids.push_back(id);
  spec.add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token", spec.bos_id >= 0);
  spec.add_eos = gguf.get_bool("tokenizer.ggml.add_eos_token", false);
  return std::make_unique<BpeTokenizer>(std::move(spec), gguf.path());
}

}  // namespace

std::vector<int32_t> end_of_generation_ids(const std::vector<std::string>& tokens, const std::vector<TokenType>& types) {
  static const char* const kTexts[] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>",   "<|end|>",
                                       "<end_of_turn>", "<|endoftext|>", "<EOT>", "<|end_of_text|>",
                                       "<turn|>"};
  std::vector<int32_t> ids;
  for (size_t id = 0; id < tokens.size(); ++id) {
    // llama.cpp takes these texts as control tokens whatever type the file gives them.
    if (types[id] != TokenType::kControl && types[id] != TokenType::kUserDefined) continue;
    for (const char* text : kTexts) {
      if (tokens[id] == text) ids.push_back(static_cast<int32_t>(id));
    }
  }
  return ids;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& gguf) {
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  if (model == "llama") return load_spm(gguf);
  if (model == "gpt2") return load_byte_level(gguf);
  if (model == "gemma4") return load_spm_bpe(gguf);
  throw Error("'" + gguf.path() + "': tokenizer.ggml.model '" + elide(model) +
              "' is not supported (supported: llama, gpt2, gemma4)");
}

}  // namespace cbatch
