// Encoding: special-token split, then per raw fragment either byte-level (optional prefix space,
// pre-tokenizer, byte map, BPE per piece) or SentencePiece-style ("▁" prefix, spaces to "▁", BPE with
// byte fallback). Decoding: control and unknown tokens give "", user-defined tokens their text, byte
// tokens their byte, other tokens their text through the byte map or with "▁" as a space.
#include "engine/text/bpe_tokenizer.hpp"

#include "engine/text/byte_level.hpp"
#include "engine/base/error.hpp"
#include "engine/text/nfc.hpp"
#include "engine/text/spm_tokenizer.hpp"

namespace cbatch {
namespace {

void check_id(int32_t id, size_t vocab, const char* what, const std::string& source) {
  if (id < -1 || id >= static_cast<int64_t>(vocab)) {
    throw Error("'" + source + "': " + what + " id " + std::to_string(id) + " is outside the vocabulary (" +
                std::to_string(vocab) + " tokens)");
  }
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerSpec spec, const std::string& source)
    : is_byte_level_(spec.is_byte_level),
      pre_tokenizer_(std::move(spec.pre_tokenizer)),
      add_prefix_space_(spec.add_prefix_space),
      space_prefix_(spec.space_prefix),
      split_on_space_marker_(spec.split_on_space_marker),
      prefix_unless_space_(spec.prefix_unless_space),
      nfc_(spec.nfc),
      add_bos_(spec.add_bos),
      add_eos_(spec.add_eos),
      model_(spec.tokens, spec.merges, spec.model, source) {
  const size_t n = spec.tokens.size();
  if (n == 0) throw Error("'" + source + "': the tokenizer has no tokens");
  if (spec.types.size() != n) {
    throw Error("'" + source + "': tokenizer has " + std::to_string(n) + " tokens but " +
                std::to_string(spec.types.size()) + " token types");
  }
  check_id(spec.model.unk_id, n, "unknown token", source);
  check_id(spec.bos_id, n, "BOS token", source);
  if (spec.add_bos && spec.bos_id < 0) throw Error("'" + source + "': add_bos is set but there is no BOS token");
  for (int32_t id : spec.eos_ids) check_id(id, n, "EOS token", source);
  decoded_.resize(n);
  keeps_space_.resize(n);
  std::vector<SpecialTokenMatcher::Token> specials;
  for (size_t id = 0; id < n; ++id) {
    const TokenType type = spec.types[id];
    decoded_[id] = decode_token(spec.tokens[id], type);
    uint8_t byte = 0;
    keeps_space_[id] = type == TokenType::kByte || (!is_byte_level_ && parse_byte_piece(spec.tokens[id], &byte));
    if (type == TokenType::kControl || type == TokenType::kUserDefined || type == TokenType::kUnknown) {
      specials.push_back({spec.tokens[id], static_cast<int32_t>(id), {}});
    }
  }
  for (SpecialTokenMatcher::Token& special : specials) {
    for (const auto& [token, strip] : spec.strips) {
      if (token == special.id) special.strip = strip;
    }
  }
  specials_.add_all(std::move(specials));
  tokens_ = std::move(spec.tokens);
  bos_id_ = spec.bos_id;
  for (int32_t id : spec.eos_ids) {
    if (id >= 0 && !is_eos(id)) eos_ids_.push_back(id);
  }
}

std::string BpeTokenizer::decode_token(const std::string& text, TokenType type) const {
  uint8_t byte = 0;
  switch (type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
      return "";
    case TokenType::kUserDefined:
      return text;
    case TokenType::kByte:
      return parse_byte_piece(text, &byte) ? std::string(1, static_cast<char>(byte)) : text;
    case TokenType::kNormal:
      break;
  }
  if (!is_byte_level_) {
    if (parse_byte_piece(text, &byte)) return std::string(1, static_cast<char>(byte));
    return replace_all(text, kSpaceMarker, " ");
  }
  std::string bytes;
  return byte_level_decode(text, &bytes) ? bytes : text;
}

void BpeTokenizer::encode_fragment(std::string_view text, bool is_first, std::vector<int32_t>& out) const {
  if (is_byte_level_) {
    std::string prefixed;
    if (add_prefix_space_ && text[0] != ' ') prefixed.push_back(' ');
    prefixed.append(text);
    for (std::string_view piece : pre_tokenizer_.split(prefixed)) model_.encode_word(byte_level_encode(piece), out);
    return;
  }
  const bool prefix = (space_prefix_ == SpacePrefix::kAlways || (space_prefix_ == SpacePrefix::kFirst && is_first)) &&
                      !(prefix_unless_space_ && (text[0] == ' ' || text.substr(0, kSpaceMarker.size()) == kSpaceMarker));
  std::string escaped(prefix ? kSpaceMarker : std::string_view());
  escaped += replace_all(text, " ", kSpaceMarker);
  for_each_metaspace_word(escaped, split_on_space_marker_, [&](std::string_view word) { model_.encode_word(word, out); });
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special && add_bos_) ids.push_back(bos_id_);
  for (const TextFragment& fragment : specials_.split(text)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
    } else if (nfc_) {
      encode_fragment(unicode::to_nfc(fragment.text), fragment.text.data() == text.data(), ids);
    } else {
      encode_fragment(fragment.text, fragment.text.data() == text.data(), ids);
    }
  }
  if (add_special && add_eos_ && !eos_ids_.empty()) ids.push_back(eos_ids_.front());
  return ids;
}

std::string BpeTokenizer::decode_piece(int32_t prev, int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                std::to_string(vocab_size() - 1) + ")");
  }
  const std::string& piece = decoded_[id];
  // SentencePiece-style decoders strip the dummy-prefix space of the first piece after BOS; without a
  // prefix (Gemma) a leading space is the text's own.
  if (!is_byte_level_ && space_prefix_ != SpacePrefix::kNone && prev == bos_id_ && prev >= 0 && !piece.empty() &&
      piece[0] == ' ' && !keeps_space_[id]) {
    return piece.substr(1);
  }
  return piece;
}

}  // namespace cbatch
