// JSON Schema -> regex, keyword by keyword (a top-level enum or const: a choice list, compiled to a trie). Supported: type (and lists of types), properties, required,
// additionalProperties false (other values: an error), enum, const, anyOf, oneOf (as anyOf), allOf of
// objects, items, prefixItems, minItems, maxItems, minLength, maxLength, pattern, format (date, time,
// date-time, email, uuid), $defs / definitions with $ref (a recursive one as a rule of its own), and
// annotations (title, description, default, examples, $schema, $id). Any value (no type, `true`) is a
// rule too, nested to any depth.
#include "engine/constrain/json_schema.hpp"

#include <simdjson.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "engine/constrain/json_number.hpp"
#include "engine/constrain/regex_nfa.hpp"
#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {
namespace {

using simdjson::dom::element;

constexpr std::string_view kWs = " ?";
constexpr std::string_view kString = R"j("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")j";
constexpr std::string_view kInteger = R"j(-?(?:0|[1-9]\d{0,15}))j";
constexpr std::string_view kNumber = R"j(-?(?:0|[1-9]\d{0,15})(?:\.\d{1,16})?(?:[eE][+-]?\d{1,3})?)j";
constexpr size_t kMaxRegexBytes = 1 << 20;
constexpr int64_t kMaxLength = 1000;  // minLength / maxLength: the regex's repetition limit
constexpr int64_t kMaxItems = 100;    // minItems / maxItems

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\.^$|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string json_text(element e) { return simdjson::minify(e); }

// A count keyword (minLength, maxItems, ...): `fallback` when absent; a non-negative integer (3 and 3.0
// alike) up to `limit`; anything else (over the limit, negative, fractional, not a number) an error
// naming the keyword, never read as absent nor clamped.
int64_t count_or(simdjson::dom::object obj, const char* key, int64_t fallback, int64_t limit) {
  element v;
  if (obj[key].get(v) != simdjson::SUCCESS) return fallback;
  const std::string quoted = std::string("JSON schema: '") + key + "' ";
  uint64_t count = 0;
  double d = 0;
  if (v.get_uint64().get(count) != simdjson::SUCCESS) {
    if (v.get_double().get(d) != simdjson::SUCCESS || !(d >= 0) || std::floor(d) != d) {
      throw Error(quoted + "must be a non-negative integer, not " + elide(json_text(v)));
    }
    count = d > 1e18 ? uint64_t{1000000000000000000} : static_cast<uint64_t>(d);
  }
  if (count > static_cast<uint64_t>(limit)) throw Error(quoted + elide(json_text(v)) + " is above the limit " + std::to_string(limit));
  return static_cast<int64_t>(count);
}

// A (min, max) pair of count keywords (max -1: absent), min <= max.
std::pair<int64_t, int64_t> count_range(simdjson::dom::object obj, const char* min_key, const char* max_key, int64_t limit) {
  const int64_t lo = count_or(obj, min_key, 0, limit), hi = count_or(obj, max_key, -1, limit);
  if (hi >= 0 && hi < lo) {
    throw Error(std::string("JSON schema: '") + max_key + "' " + std::to_string(hi) + " is below '" + min_key + "' " + std::to_string(lo));
  }
  return {lo, hi};
}

std::string sequence_of(std::string_view open, const std::string& item, std::string_view close) {
  return std::string(open) + std::string(kWs) + "(?:" + item + "(?:" + std::string(kWs) + "," + std::string(kWs) + item + ")*)?" +
         std::string(kWs) + std::string(close);
}

std::string member_of(const std::string& value) { return std::string(kString) + std::string(kWs) + ":" + std::string(kWs) + value; }

// An object whose values are `value` (a regex, or a rule call).
std::string object_of(const std::string& value) { return sequence_of("\\{", member_of(value), "\\}"); }

// Any JSON value, its nested values being `inner` (the call of this same rule).
std::string value_body(const std::string& inner) {
  return "(?:" + std::string(kString) + "|" + std::string(kNumber) + "|true|false|null|" + object_of(inner) + "|" +
         sequence_of("\\[", inner, "\\]") + ")";
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(element root) : root_(root) {}

  // The regex of one (sub)schema; throws when it grows past kMaxRegexBytes ($ref fan-out can multiply).
  std::string compile(element s) {
    std::string regex = compile_unchecked(s);
    if (regex.size() > kMaxRegexBytes) throw Error("JSON schema: too large once its references are expanded");
    return regex;
  }

 private:
  std::string compile_unchecked(element s) {
    if (s.is_bool()) {
      if (!bool(s)) throw Error("JSON schema: 'false' accepts nothing");
      return any_value();
    }
    simdjson::dom::object obj;
    if (s.get_object().get(obj) != simdjson::SUCCESS) throw Error("JSON schema: a schema must be an object or a boolean");
    for (auto [key, value] : obj) check_keyword(key);
    if (auto ref = obj["$ref"]; ref.error() == simdjson::SUCCESS) return compile_ref(ref.value());
    if (auto c = obj["const"]; c.error() == simdjson::SUCCESS) return escape(json_text(c.value()));
    if (auto e = obj["enum"]; e.error() == simdjson::SUCCESS) return alternatives_of_values(e.value());
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto list = obj[key]; list.error() == simdjson::SUCCESS) return alternatives(list.value());
    }
    if (auto all = obj["allOf"]; all.error() == simdjson::SUCCESS) return all_of(all.value());
    element type_el;
    if (obj["type"].get(type_el) != simdjson::SUCCESS) {
      if (obj["properties"].error() == simdjson::SUCCESS) return object_regex(obj);
      if (obj["items"].error() == simdjson::SUCCESS) return array_regex(obj);
      for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
                              "pattern", "format", "minItems", "maxItems", "prefixItems", "required", "additionalProperties"}) {
        if (obj[key].error() == simdjson::SUCCESS) {  // it would bind only values of its type: any other would pass
          throw Error("JSON schema keyword '" + elide(key) + "' is supported with a 'type' only");
        }
      }
      return any_value();
    }
    if (type_el.is_array()) {
      std::string out;
      for (element t : type_el.get_array()) out += (out.empty() ? "" : "|") + typed(std::string(std::string_view(t)), obj);
      return std::string("(?:").append(out).append(")");
    }
    std::string_view type;
    if (type_el.get_string().get(type) != simdjson::SUCCESS) throw Error("JSON schema: 'type' must be a string or a list");
    return typed(std::string(type), obj);
  }

  static void check_keyword(std::string_view key) {
    static const std::set<std::string_view> known = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf", "allOf",
        "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "$ref",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "$defs", "definitions", "title", "description", "default", "examples", "$schema", "$id", "$comment"};
    if (known.count(key) == 0) throw Error("JSON schema keyword '" + elide(key) + "' is not supported");
  }

  std::string typed(const std::string& type, simdjson::dom::object obj) {
    if (type == "object") return object_regex(obj);
    if (type == "array") return array_regex(obj);
    if (type == "string") return string_regex(obj);
    if (type == "integer" || type == "number") {
      const NumberBounds bounds = read_bounds(obj);
      if (!bounds.is_set()) return std::string(type == "integer" ? kInteger : kNumber);
      return type == "integer" ? bounded_integer_regex(bounds) : bounded_number_regex(bounds);
    }
    if (type == "boolean") return "(?:true|false)";
    if (type == "null") return "null";
    throw Error("JSON schema: type '" + elide(type) + "' is not a JSON type");
  }

  // A definition is inlined unless it refers to itself (through others too): then it becomes a rule,
  // its body the inlined text, and every reference to it a call.
  static NumberBounds read_bounds(simdjson::dom::object obj) {
    NumberBounds b;
    struct Keyword {
      const char* key;
      bool is_lo;
      bool exclusive;
    };
    for (const auto& [key, is_lo, exclusive] : {Keyword{"minimum", true, false}, Keyword{"exclusiveMinimum", true, true},
                                               Keyword{"maximum", false, false}, Keyword{"exclusiveMaximum", false, true}}) {
      element v;
      if (obj[key].get(v) != simdjson::SUCCESS) continue;
      double d = 0;
      if (v.get_double().get(d) != simdjson::SUCCESS) throw Error(std::string("JSON schema: '") + key + "' must be a number");
      std::optional<double>& side = is_lo ? b.lo : b.hi;
      // Both given: the tighter one wins (equal: exclusive wins).
      const bool tighter = !side || (is_lo ? d > *side : d < *side) || (d == *side && exclusive);
      if (!tighter) continue;
      side = d;
      (is_lo ? b.lo_exclusive : b.hi_exclusive) = exclusive;
      (is_lo ? b.lo_keyword : b.hi_keyword) = key;
    }
    return b;
  }

  std::string compile_ref(element ref) {
    std::string_view path;
    if (ref.get_string().get(path) != simdjson::SUCCESS) throw Error("JSON schema: '$ref' must be a string");
    const std::string key(path);
    if (const auto it = ref_rules_.find(key); it != ref_rules_.end()) return call(it->second);
    if (expanding_.count(key)) {
      ref_rules_.emplace(key, add_rule(""));
      return call(ref_rules_[key]);
    }
    expanding_.insert(key);
    const std::string body = compile(ref_target(path));
    expanding_.erase(key);
    const auto it = ref_rules_.find(key);
    if (it == ref_rules_.end()) return body;
    rules_[static_cast<size_t>(it->second)] = body;
    return call(it->second);
  }

  element ref_target(std::string_view path) {
    if (path == "#") return root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string_view p(prefix);
      if (path.substr(0, p.size()) != p) continue;
      element target;
      if (root_[p.substr(2, p.size() - 3)][std::string(path.substr(p.size()))].get(target) != simdjson::SUCCESS) {
        throw Error("JSON schema: '$ref' " + elide(path) + " names no definition");
      }
      return target;
    }
    throw Error("JSON schema: '$ref' " + elide(path) + " is not a local #/$defs reference");
  }

  static std::string call(int32_t rule) { return "(?&" + std::to_string(rule) + ")"; }
  int32_t add_rule(std::string body) {
    rules_.push_back(std::move(body));
    return static_cast<int32_t>(rules_.size() - 1);
  }
  // Any JSON value, nested to any depth: a rule of its own.
  std::string any_value() {
    if (any_value_rule_ < 0) {
      any_value_rule_ = add_rule("");
      rules_[static_cast<size_t>(any_value_rule_)] = value_body(call(any_value_rule_));
    }
    return call(any_value_rule_);
  }

  std::string alternatives(element list) {
    std::string out;
    for (element s : list.get_array()) {
      if (!out.empty()) out += '|';
      out += compile(s);
    }
    if (out.empty()) throw Error("JSON schema: an empty anyOf/oneOf accepts nothing");
    return std::string("(?:").append(out).append(")");
  }

  // The JSON texts of an enum's values (minified: the form a document is written in).
  static std::vector<std::string> enum_texts(element list) {
    if (!list.is_array()) throw Error("JSON schema: 'enum' must be an array, not " + elide(json_text(list)));
    std::vector<std::string> texts;
    for (element v : list.get_array()) texts.push_back(json_text(v));
    if (texts.empty()) throw Error("JSON schema: an empty enum accepts nothing");
    return texts;
  }

  static std::string alternatives_of_values(element list) {
    std::string out;
    for (const std::string& text : enum_texts(list)) {
      if (!out.empty()) out += '|';
      out += escape(text);
    }
    return std::string("(?:").append(out).append(")");
  }

  // allOf of object schemas: their properties and required lists merged.
  std::string all_of(element list) {
    std::vector<std::pair<std::string, element>> props;
    std::set<std::string> required;
    for (element s : list.get_array()) {
      simdjson::dom::object obj;
      if (s.get_object().get(obj) != simdjson::SUCCESS || obj["properties"].error() != simdjson::SUCCESS) {
        throw Error("JSON schema: allOf is supported for object schemas with properties only");
      }
      for (auto [k, v] : obj["properties"].get_object()) props.emplace_back(std::string(k), v);
      if (obj["required"].error() == simdjson::SUCCESS) {
        for (element r : obj["required"].get_array()) required.insert(std::string(std::string_view(r)));
      }
    }
    return members_regex(props, required);
  }

  std::string object_regex(simdjson::dom::object obj) {
    element extra;
    if (obj["additionalProperties"].get(extra) == simdjson::SUCCESS && !(extra.is_bool() && !bool(extra))) {
      if (obj["properties"].error() != simdjson::SUCCESS) {  // a map: any keys, values of one schema
        const std::string value = extra.is_bool() ? any_value() : compile(extra);
        const std::string member = std::string(kString) + std::string(kWs) + ":" + std::string(kWs) + value;
        return "\\{" + std::string(kWs) + "(?:" + member + "(?:" + std::string(kWs) + "," + std::string(kWs) + member +
               ")*)?" + std::string(kWs) + "\\}";
      }
      throw Error("JSON schema keyword 'additionalProperties' is supported as false, or without 'properties'");
    }
    std::vector<std::pair<std::string, element>> props;
    std::set<std::string> required;
    if (obj["properties"].error() == simdjson::SUCCESS) {
      for (auto [k, v] : obj["properties"].get_object()) props.emplace_back(std::string(k), v);
    }
    if (obj["required"].error() == simdjson::SUCCESS) {
      for (element r : obj["required"].get_array()) required.insert(std::string(std::string_view(r)));
    }
    if (props.empty()) {  // no properties: {} with additionalProperties false, else any object
      const bool closed = obj["additionalProperties"].error() == simdjson::SUCCESS;
      return closed ? "\\{" + std::string(kWs) + "\\}" : object_of(any_value());
    }
    return members_regex(props, required);
  }

  // Properties in order; a required one is always written, an optional one may be left out. The comma
  // goes before every property but the first written one.
  std::string members_regex(const std::vector<std::pair<std::string, element>>& props, const std::set<std::string>& required) {
    std::vector<std::string> members;
    for (const auto& [name, schema] : props) {
      std::string member = "\"";
      member.append(escape(name)).append("\"").append(kWs).append(":").append(kWs).append(compile(schema));
      members.push_back(std::move(member));
    }
    // tail(i, first): the members from i on, when none has been written yet (first) or some has.
    std::map<std::pair<size_t, bool>, std::string> memo;
    std::function<std::string(size_t, bool)> tail = [&](size_t i, bool first) -> std::string {
      if (i == members.size()) return "";
      const auto key = std::make_pair(i, first);
      if (auto it = memo.find(key); it != memo.end()) return it->second;
      const std::string sep = first ? "" : std::string(kWs) + "," + std::string(kWs);
      const std::string with = sep + members[i] + tail(i + 1, false);
      std::string out = required.count(props[i].first) ? with : std::string("(?:").append(with).append("|").append(tail(i + 1, first)).append(")");
      return memo[key] = out;
    };
    return "\\{" + std::string(kWs) + tail(0, true) + std::string(kWs) + "\\}";
  }

  std::string array_regex(simdjson::dom::object obj) {
    std::vector<std::string> prefix;
    if (obj["prefixItems"].error() == simdjson::SUCCESS) {
      for (element s : obj["prefixItems"].get_array()) prefix.push_back(compile(s));
    }
    element items;
    std::string item = any_value();
    bool more = true;
    if (obj["items"].get(items) == simdjson::SUCCESS) {
      if (items.is_bool() && !bool(items)) more = false;
      else item = compile(items);
    }
    const auto [lo, hi] = count_range(obj, "minItems", "maxItems", kMaxItems);
    const int64_t fixed = static_cast<int64_t>(prefix.size());  // every prefix item is written
    if (hi >= 0 && hi < fixed) {
      throw Error("JSON schema: 'maxItems' " + std::to_string(hi) + " is below the " + std::to_string(fixed) + " 'prefixItems' (all are written)");
    }
    if (!more && lo > fixed) {
      throw Error("JSON schema: 'minItems' " + std::to_string(lo) + " is above the " + std::to_string(fixed) + " 'prefixItems' with 'items' false");
    }
    const std::string sep = std::string(kWs) + "," + std::string(kWs);
    std::string body;
    for (size_t i = 0; i < prefix.size(); ++i) body += (i ? sep : "") + prefix[i];
    if (more) {
      const int64_t need = std::max<int64_t>(0, lo - fixed);
      std::string rest;
      for (int64_t i = 0; i < need; ++i) rest += (i == 0 && fixed == 0 ? "" : sep) + item;
      const std::string one = sep + item;
      if (hi < 0) {
        rest += fixed + need == 0 ? "(?:" + item + "(?:" + one + ")*)?" : "(?:" + one + ")*";
      } else if (hi > fixed + need) {
        const int64_t optional = hi - fixed - need;
        rest += fixed + need == 0 ? "(?:" + item + "(?:" + one + "){0," + std::to_string(optional - 1) + "})?"
                                  : "(?:" + one + "){0," + std::to_string(optional) + "}";
      }
      body += rest;
    }
    return "\\[" + std::string(kWs) + body + std::string(kWs) + "\\]";
  }

  // A string of a format, of a pattern, or of a length range: one of the three (the others would be
  // left unenforced, so a schema asking for two is refused).
  static std::string string_regex(simdjson::dom::object obj) {
    const bool has_format = obj["format"].error() == simdjson::SUCCESS, has_pattern = obj["pattern"].error() == simdjson::SUCCESS;
    const bool has_length = obj["minLength"].error() == simdjson::SUCCESS || obj["maxLength"].error() == simdjson::SUCCESS;
    if (has_format + has_pattern + has_length > 1) {
      throw Error(std::string("JSON schema: '") + (has_format ? "format" : "pattern") + "' together with " +
                  (has_format && has_pattern ? "'pattern'" : "'minLength'/'maxLength'") + " is not supported");
    }
    std::string_view format, pattern;
    if (obj["format"].get(format) == simdjson::SUCCESS) {
      if (format == "date") return R"j("\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])")j";
      if (format == "time") return R"j("(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)")j";
      if (format == "date-time") {
        return R"j("\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)")j";
      }
      if (format == "email") return R"j("[A-Za-z0-9._%+-]{1,32}@[A-Za-z0-9-]{1,32}(?:\.[A-Za-z0-9-]{1,32}){0,3}\.[A-Za-z]{2,8}")j";
      if (format == "uuid") return R"j("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")j";
      throw Error("JSON schema format '" + elide(format) + "' is not supported");
    }
    if (obj["pattern"].get(pattern) == simdjson::SUCCESS) {  // the pattern's language, its characters plain
      if (!pattern.empty() && pattern.front() == '^') pattern.remove_prefix(1);
      if (!pattern.empty() && pattern.back() == '$' && !ends_escaped(pattern.substr(0, pattern.size() - 1))) pattern.remove_suffix(1);
      compile_regex(pattern);  // on its own: a stray ')' or a rule call must not reach the text around it
      return "\"(?:" + std::string(pattern) + ")\"";
    }
    const auto [lo, hi] = count_range(obj, "minLength", "maxLength", kMaxLength);
    if (lo == 0 && hi < 0) return std::string(kString);
    return R"j("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){)j" + std::to_string(lo) + "," +
           (hi >= 0 ? std::to_string(hi) : "") + "}\"";
  }

  // Whether `text` ends in an odd run of backslashes (the character after it is escaped).
  static bool ends_escaped(std::string_view text) {
    size_t n = 0;
    while (n < text.size() && text[text.size() - 1 - n] == '\\') ++n;
    return n % 2 == 1;
  }

  // A root schema that is a const or an enum (as compile_unchecked reads it: no $ref first) is a list of
  // JSON texts, compiled as a choice trie (choice_trie.hpp) rather than an alternation regex, so that an
  // enum of 100,000 values stays linear. An enum inside a larger schema is still an alternation.
  std::optional<std::vector<std::string>> top_level_texts() const {
    simdjson::dom::object obj;
    if (root_.get_object().get(obj) != simdjson::SUCCESS || obj["$ref"].error() == simdjson::SUCCESS) return std::nullopt;
    for (auto [key, value] : obj) check_keyword(key);
    if (auto c = obj["const"]; c.error() == simdjson::SUCCESS) return std::vector<std::string>{json_text(c.value())};
    if (auto e = obj["enum"]; e.error() == simdjson::SUCCESS) return enum_texts(e.value());
    return std::nullopt;
  }

  element root_;
  std::vector<std::string> rules_{""};       // (rule) regex bodies; rule 0, the root, set by run()
  std::map<std::string, int32_t> ref_rules_;  // recursive $ref path -> its rule
  std::set<std::string> expanding_;           // $ref paths being inlined
  int32_t any_value_rule_ = -1;

 public:
  ConstraintSpec run() {
    if (auto texts = top_level_texts()) return {ConstraintSpec::Kind::kChoice, std::move(*texts)};
    rules_[0] = compile(root_);
    if (rules_.size() == 1) return {ConstraintSpec::Kind::kRegex, {rules_[0]}};
    return {ConstraintSpec::Kind::kRegexRules, rules_};
  }
};

}  // namespace

ConstraintSpec json_object_constraint() {
  return {ConstraintSpec::Kind::kRegexRules, {object_of("(?&1)"), value_body("(?&1)")}};
}

ConstraintSpec json_schema_constraint(std::string_view schema) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(schema.data(), schema.size()).get(root) != simdjson::SUCCESS) {
    throw Error("JSON schema: not valid JSON");
  }
  try {
    return SchemaCompiler(root).run();
  } catch (const simdjson::simdjson_error& e) {  // a keyword's value of the wrong JSON type ("enum": 5)
    throw Error(std::string("JSON schema: a keyword's value has the wrong type (") + elide(e.what()) + ")");
  }
}

}  // namespace cbatch
