// tokenizer.json's vocab and added_tokens -> token texts and types by id (token_table_json.hpp).
#include "engine/text/token_table_json.hpp"

#include <utility>

namespace cbatch {
namespace {

constexpr int64_t kMaxTokenId = (1 << 22) - 1;

void set_token(std::vector<std::string>& tokens, std::vector<TokenType>& types, int64_t id, std::string text,
               TokenType type) {
  if (static_cast<size_t>(id) >= tokens.size()) {
    tokens.resize(id + 1);
    types.resize(id + 1, TokenType::kUnused);
  }
  tokens[id] = std::move(text);
  types[id] = type;
}

}  // namespace

void read_json_vocab(const JsonFields& model, std::vector<std::string>& tokens, std::vector<TokenType>& types) {
  for (auto [key, value] : model.members("vocab")) {
    int64_t id;
    if (value.get_int64().get(id) || id < 0 || id > kMaxTokenId) {
      model.fail("vocab", "maps '" + std::string(key) + "' to an invalid id");
    }
    set_token(tokens, types, id, std::string(key), TokenType::kNormal);
  }
}

void read_json_added_tokens(const JsonFields& root, std::vector<std::string>& tokens, std::vector<TokenType>& types,
                            const std::function<void(const JsonFields& token, int32_t id)>& each) {
  if (!root.has("added_tokens")) return;
  size_t index = 0;
  for (simdjson::dom::element value : root.array("added_tokens")) {
    const JsonFields t = root.item("added_tokens", index++, value);
    const int64_t id = t.get_int("id");
    if (id < 0 || id > kMaxTokenId) t.fail("id", "is out of range");
    std::string text = t.get_string("content");
    set_token(tokens, types, id, std::move(text),
              t.get_bool("special", false) ? TokenType::kControl : TokenType::kUserDefined);
    if (each) each(t, static_cast<int32_t>(id));
  }
}

MetaspaceSpec read_metaspace(const JsonFields& p) {
  if (p.get_string("replacement", std::string(kSpaceMarker)) != kSpaceMarker) p.fail("replacement", "must be \"▁\"");
  std::string scheme = p.get_bool("add_prefix_space", true) ? "always" : "never";
  scheme = p.get_string("prepend_scheme", scheme);
  if (scheme != "always" && scheme != "first" && scheme != "never") p.fail("prepend_scheme", "'" + scheme + "' is unknown");
  MetaspaceSpec out;
  out.space_prefix = scheme == "always" ? SpacePrefix::kAlways : scheme == "first" ? SpacePrefix::kFirst : SpacePrefix::kNone;
  out.split = p.get_bool("split", true);
  return out;
}

}  // namespace cbatch
