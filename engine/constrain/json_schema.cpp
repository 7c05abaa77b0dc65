// JSON Schema -> regex, keyword by keyword. Supported: type (and lists of types), properties, required,
// additionalProperties false (other values: an error), enum, const, anyOf, oneOf (as anyOf), allOf of
// objects, items, prefixItems, minItems, maxItems, minLength, maxLength, pattern, format (date, time,
// date-time, email, uuid), $defs / definitions with $ref (recursion unrolled kMaxRefDepth levels), and
// annotations (title, description, default, examples, $schema, $id).
#include "engine/constrain/json_schema.hpp"

#include <simdjson.h>

#include <functional>
#include <map>
#include <set>

#include "engine/core/error.hpp"

namespace cbatch {
namespace {

using simdjson::dom::element;

constexpr std::string_view kWs = " ?";
constexpr std::string_view kString = R"j("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")j";
constexpr std::string_view kInteger = R"j(-?(?:0|[1-9]\d{0,15}))j";
constexpr std::string_view kNumber = R"j(-?(?:0|[1-9]\d{0,15})(?:\.\d{1,16})?(?:[eE][+-]?\d{1,3})?)j";
constexpr int kMaxRefDepth = 3;
constexpr size_t kMaxRegexBytes = 1 << 20;

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\.^$|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string json_text(element e) { return simdjson::minify(e); }

int64_t int_or(simdjson::dom::object obj, const char* key, int64_t fallback) {
  int64_t v = fallback;
  if (obj[key].get(v) != simdjson::SUCCESS) return fallback;
  return v;
}

std::string value_regex(int depth);

std::string value_regex(int depth) {
  std::string v = "(?:" + std::string(kString) + "|" + std::string(kNumber) + "|true|false|null";
  if (depth > 0) {
    const std::string inner = value_regex(depth - 1);
    const std::string member = std::string(kString) + std::string(kWs) + ":" + std::string(kWs) + inner;
    v += "|\\{" + std::string(kWs) + "(?:" + member + "(?:" + std::string(kWs) + "," + std::string(kWs) + member + ")*)?" +
         std::string(kWs) + "\\}";
    v += "|\\[" + std::string(kWs) + "(?:" + inner + "(?:" + std::string(kWs) + "," + std::string(kWs) + inner + ")*)?" +
         std::string(kWs) + "\\]";
  }
  return v + ")";
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(element root) : root_(root) {}

  // The regex of one (sub)schema; throws when it grows past kMaxRegexBytes ($ref fan-out can multiply).
  std::string compile(element s, int ref_depth = 0) {
    std::string regex = compile_unchecked(s, ref_depth);
    if (regex.size() > kMaxRegexBytes) throw Error("JSON schema: too large once its references are expanded");
    return regex;
  }

 private:
  std::string compile_unchecked(element s, int ref_depth) {
    if (s.is_bool()) {
      if (!bool(s)) throw Error("JSON schema: 'false' accepts nothing");
      return value_regex(2);
    }
    simdjson::dom::object obj;
    if (s.get_object().get(obj) != simdjson::SUCCESS) throw Error("JSON schema: a schema must be an object or a boolean");
    for (auto [key, value] : obj) check_keyword(key);
    if (auto ref = obj["$ref"]; ref.error() == simdjson::SUCCESS) return compile_ref(ref.value(), ref_depth);
    if (auto c = obj["const"]; c.error() == simdjson::SUCCESS) return escape(json_text(c.value()));
    if (auto e = obj["enum"]; e.error() == simdjson::SUCCESS) return alternatives_of_values(e.value());
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto list = obj[key]; list.error() == simdjson::SUCCESS) return alternatives(list.value(), ref_depth);
    }
    if (auto all = obj["allOf"]; all.error() == simdjson::SUCCESS) return all_of(all.value(), ref_depth);
    element type_el;
    if (obj["type"].get(type_el) != simdjson::SUCCESS) {
      if (obj["properties"].error() == simdjson::SUCCESS) return object_regex(obj, ref_depth);
      if (obj["items"].error() == simdjson::SUCCESS) return array_regex(obj, ref_depth);
      return value_regex(2);
    }
    if (type_el.is_array()) {
      std::string out;
      for (element t : type_el.get_array()) out += (out.empty() ? "" : "|") + typed(std::string(std::string_view(t)), obj, ref_depth);
      return std::string("(?:").append(out).append(")");
    }
    std::string_view type;
    if (type_el.get_string().get(type) != simdjson::SUCCESS) throw Error("JSON schema: 'type' must be a string or a list");
    return typed(std::string(type), obj, ref_depth);
  }

  static void check_keyword(std::string_view key) {
    static const std::set<std::string_view> known = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf", "allOf",
        "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "$ref",
        "$defs", "definitions", "title", "description", "default", "examples", "$schema", "$id", "$comment"};
    if (known.count(key) == 0) throw Error("JSON schema keyword '" + std::string(key) + "' is not supported");
  }

  std::string typed(const std::string& type, simdjson::dom::object obj, int ref_depth) {
    if (type == "object") return object_regex(obj, ref_depth);
    if (type == "array") return array_regex(obj, ref_depth);
    if (type == "string") return string_regex(obj);
    if (type == "integer") return std::string(kInteger);
    if (type == "number") return std::string(kNumber);
    if (type == "boolean") return "(?:true|false)";
    if (type == "null") return "null";
    throw Error("JSON schema: type '" + type + "' is not a JSON type");
  }

  std::string compile_ref(element ref, int ref_depth) {
    std::string_view path;
    if (ref.get_string().get(path) != simdjson::SUCCESS) throw Error("JSON schema: '$ref' must be a string");
    if (ref_depth >= kMaxRefDepth) return "[^\\s\\S]";  // deeper recursion: nothing (optional parts end here)
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string_view p(prefix);
      if (path.substr(0, p.size()) == p) {
        element target;
        const std::string name(path.substr(p.size()));
        if (root_[p.substr(2, p.size() - 3)][name].get(target) != simdjson::SUCCESS) {
          throw Error("JSON schema: '$ref' " + std::string(path) + " names no definition");
        }
        return compile(target, ref_depth + 1);
      }
    }
    if (path == "#") return compile(root_, ref_depth + 1);
    throw Error("JSON schema: '$ref' " + std::string(path) + " is not a local #/$defs reference");
  }

  std::string alternatives(element list, int ref_depth) {
    std::string out;
    for (element s : list.get_array()) {
      if (!out.empty()) out += '|';
      out += compile(s, ref_depth);
    }
    if (out.empty()) throw Error("JSON schema: an empty anyOf/oneOf accepts nothing");
    return std::string("(?:").append(out).append(")");
  }

  static std::string alternatives_of_values(element list) {
    std::string out;
    for (element v : list.get_array()) {
      if (!out.empty()) out += '|';
      out += escape(json_text(v));
    }
    if (out.empty()) throw Error("JSON schema: an empty enum accepts nothing");
    return std::string("(?:").append(out).append(")");
  }

  // allOf of object schemas: their properties and required lists merged.
  std::string all_of(element list, int ref_depth) {
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
    return members_regex(props, required, ref_depth);
  }

  std::string object_regex(simdjson::dom::object obj, int ref_depth) {
    element extra;
    if (obj["additionalProperties"].get(extra) == simdjson::SUCCESS && !(extra.is_bool() && !bool(extra))) {
      if (obj["properties"].error() != simdjson::SUCCESS) {  // a map: any keys, values of one schema
        const std::string value = extra.is_bool() ? value_regex(2) : compile(extra, ref_depth);
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
      return closed ? "\\{" + std::string(kWs) + "\\}" : json_object_regex(2);
    }
    return members_regex(props, required, ref_depth);
  }

  // Properties in order; a required one is always written, an optional one may be left out. The comma
  // goes before every property but the first written one.
  std::string members_regex(const std::vector<std::pair<std::string, element>>& props, const std::set<std::string>& required,
                            int ref_depth) {
    std::vector<std::string> members;
    for (const auto& [name, schema] : props) {
      std::string member = "\"";
      member.append(escape(name)).append("\"").append(kWs).append(":").append(kWs).append(compile(schema, ref_depth));
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

  std::string array_regex(simdjson::dom::object obj, int ref_depth) {
    std::vector<std::string> prefix;
    if (obj["prefixItems"].error() == simdjson::SUCCESS) {
      for (element s : obj["prefixItems"].get_array()) prefix.push_back(compile(s, ref_depth));
    }
    element items;
    std::string item = value_regex(1);
    bool more = true;
    if (obj["items"].get(items) == simdjson::SUCCESS) {
      if (items.is_bool() && !bool(items)) more = false;
      else item = compile(items, ref_depth);
    }
    const int64_t lo = int_or(obj, "minItems", 0), hi = int_or(obj, "maxItems", -1);
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > 100 || hi > 100) throw Error("JSON schema: minItems/maxItems must be 0..100, min <= max");
    const std::string sep = std::string(kWs) + "," + std::string(kWs);
    std::string body;
    for (size_t i = 0; i < prefix.size(); ++i) body += (i ? sep : "") + prefix[i];
    const int64_t fixed = static_cast<int64_t>(prefix.size());
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

  static std::string string_regex(simdjson::dom::object obj) {
    std::string_view format, pattern;
    if (obj["format"].get(format) == simdjson::SUCCESS) {
      if (format == "date") return R"j("\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])")j";
      if (format == "time") return R"j("(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)?")j";
      if (format == "date-time") {
        return R"j("\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)")j";
      }
      if (format == "email") return R"j("[A-Za-z0-9._%+-]{1,32}@[A-Za-z0-9-]{1,32}(?:\.[A-Za-z0-9-]{1,32}){0,3}\.[A-Za-z]{2,8}")j";
      if (format == "uuid") return R"j("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")j";
      throw Error("JSON schema format '" + std::string(format) + "' is not supported");
    }
    if (obj["pattern"].get(pattern) == simdjson::SUCCESS) {  // the pattern's language, its characters plain
      if (!pattern.empty() && pattern.front() == '^') pattern.remove_prefix(1);
      if (!pattern.empty() && pattern.back() == '$') pattern.remove_suffix(1);
      return "\"(?:" + std::string(pattern) + ")\"";
    }
    const int64_t lo = int_or(obj, "minLength", 0), hi = int_or(obj, "maxLength", -1);
    if (lo == 0 && hi < 0) return std::string(kString);
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > 1000 || hi > 1000) throw Error("JSON schema: minLength/maxLength must be 0..1000");
    return R"j("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){)j" + std::to_string(lo) + "," +
           (hi >= 0 ? std::to_string(hi) : "") + "}\"";
  }

  element root_;
};

}  // namespace

std::string json_object_regex(int max_depth) {
  const std::string inner = value_regex(max_depth - 1);
  const std::string member = std::string(kString) + std::string(kWs) + ":" + std::string(kWs) + inner;
  return "\\{" + std::string(kWs) + "(?:" + member + "(?:" + std::string(kWs) + "," + std::string(kWs) + member + ")*)?" +
         std::string(kWs) + "\\}";
}

std::string json_schema_regex(std::string_view schema) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(schema.data(), schema.size()).get(root) != simdjson::SUCCESS) {
    throw Error("JSON schema: not valid JSON");
  }
  return SchemaCompiler(root).compile(root);
}

}  // namespace cbatch
