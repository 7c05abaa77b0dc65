// The structured-output fields of a request: vLLM's `structured_outputs` {regex, choice, json, grammar}
// and its older guided_regex / guided_choice / guided_json / guided_grammar, and OpenAI's
// response_format. Regex, choice, JSON schema and json_object constraints are taken, each as a regex
// (json_schema.hpp); grammars are an error naming the field, never a silently unconstrained run.
#include "engine/constrain/json_schema.hpp"
#include "engine/constrain/regex_nfa.hpp"
#include "engine/core/error.hpp"
#include "engine/io/sampling_parser.hpp"

namespace cbatch {
namespace {

constexpr std::string_view kNotYet = "a regex, choice, JSON schema or json_object constraint (grammars are not supported yet)";

// A JSON schema (an object, or its text) as the regex of its valid documents.
std::string read_schema(simdjson::dom::element v, const std::string& name) {
  const std::string text = v.is_string() ? std::string(get_string(v, name)) : std::string(simdjson::minify(v));
  if (!v.is_string() && !v.is_object()) fail_field(name, "a JSON schema object (or its text)", v);
  try {
    std::string regex = json_schema_regex(text);
    compile_regex(regex);
    return regex;
  } catch (const Error& e) {
    fail_field(name, std::string("a JSON schema cbatch supports: ") + e.what(), v);
  }
}

std::string read_regex(simdjson::dom::element v, const std::string& name) {
  const std::string pattern(get_string(v, name));
  try {
    compile_regex(pattern);
  } catch (const Error& e) {
    fail_field(name, std::string("a regular expression cbatch supports: ") + e.what(), v);
  }
  return pattern;
}

std::string read_choice(simdjson::dom::element v, const std::string& name) {
  std::vector<std::string> choices;
  simdjson::dom::array list;
  if (v.get_array().get(list) != simdjson::SUCCESS) fail_field(name, "a non-empty list of strings", v);
  for (simdjson::dom::element e : list) {
    if (!e.is_string()) fail_field(name, "a non-empty list of strings", v);
    choices.emplace_back(get_string(e, name));
  }
  if (choices.empty()) fail_field(name, "a non-empty list of strings", v);
  return choice_regex(choices);
}

// One constraint kind from (kind, value); "" for kinds that constrain nothing.
std::string read_kind(std::string_view kind, simdjson::dom::element v, const std::string& name) {
  if (kind == "regex") return read_regex(v, name);
  if (kind == "choice") return read_choice(v, name);
  if (kind == "json") return read_schema(v, name);
  if (kind == "json_object") {
    if (v.is_bool() && !bool(v)) return "";
    return json_object_regex();
  }
  fail_field(name, kNotYet, v);
}

void set_once(SamplingParams& out, std::string regex, const std::string& name, simdjson::dom::element v) {
  if (!out.regex_constraint.empty()) fail_field(name, "the only structured-output constraint of the request", v);
  out.regex_constraint = std::move(regex);
}

}  // namespace

void parse_constraint_fields(const FieldSet& f, SamplingParams& out) {
  if (auto v = f.find("structured_outputs")) {
    simdjson::dom::object obj;
    if (v->get_object().get(obj) != simdjson::SUCCESS) fail_field(f.name("structured_outputs"), "an object", *v);
    for (auto [key, value] : obj) {
      if (value.is_null()) continue;
      const std::string name = f.name("structured_outputs") + "." + std::string(key);
      if (key == "regex" || key == "choice" || key == "json" || key == "grammar" || key == "json_object") {
        set_once(out, read_kind(key, value, name), name, value);
      }
    }
  }
  for (std::string_view kind : {"regex", "choice", "json", "grammar"}) {
    const std::string key = "guided_" + std::string(kind);
    if (auto v = f.find(key)) set_once(out, read_kind(kind, *v, f.name(key)), f.name(key), *v);
  }
  if (auto v = f.find("response_format")) {
    simdjson::dom::object obj;
    std::string_view type;
    if (v->get_object().get(obj) != simdjson::SUCCESS || obj["type"].get_string().get(type) != simdjson::SUCCESS) {
      fail_field(f.name("response_format"), "an object with a string 'type'", *v);
    }
    const std::string name = f.name("response_format");
    if (type == "json_object") {
      set_once(out, json_object_regex(), name, *v);
    } else if (type == "json_schema") {
      simdjson::dom::element schema;
      if (obj["json_schema"]["schema"].get(schema) != simdjson::SUCCESS) {
        fail_field(name + ".json_schema.schema", "a JSON schema object", *v);
      }
      set_once(out, read_schema(schema, name + ".json_schema.schema"), name, *v);
    } else if (type != "text") {
      fail_field(name + ".type", "text, json_object or json_schema", *v);
    }
  }
}

}  // namespace cbatch
