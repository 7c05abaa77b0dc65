// The structured-output fields of a request: vLLM's `structured_outputs` {regex, choice, json, grammar}
// and its older guided_regex / guided_choice / guided_json / guided_grammar, and OpenAI's
// response_format: regexes, choice lists (compiled to a trie) and GBNF grammars as they are, JSON schemas and
// json_object through json_schema.hpp; each is compiled once here, so a refused one is an error line.
#include "engine/constrain/json_schema.hpp"
#include "engine/base/constraint_spec.hpp"
#include "engine/base/error.hpp"
#include "engine/constrain/grammar.hpp"
#include "engine/constrain/regex_nfa.hpp"
#include "engine/io/sampling_parser.hpp"

namespace cbatch {
namespace {

// The constraint compiled once to check it: a refused one is an error line naming the field.
ConstraintSpec checked(ConstraintSpec spec, simdjson::dom::element v, const std::string& name, std::string_view what) {
  try {
    check_constraint(spec);
  } catch (const Error& e) {
    fail_field(name, std::string(what) + " cbatch supports: " + e.what(), v);
  }
  return spec;
}

// A JSON schema (an object, or its text) as the language of its valid documents.
ConstraintSpec read_schema(simdjson::dom::element v, const std::string& name) {
  if (!v.is_string() && !v.is_object()) fail_field(name, "a JSON schema object (or its text)", v);
  const std::string text = v.is_string() ? std::string(get_string(v, name)) : std::string(simdjson::minify(v));
  ConstraintSpec spec;
  try {
    spec = json_schema_constraint(text);
  } catch (const Error& e) {
    fail_field(name, std::string("a JSON schema cbatch supports: ") + e.what(), v);
  }
  return checked(std::move(spec), v, name, "a JSON schema");
}

ConstraintSpec read_text(ConstraintSpec::Kind kind, simdjson::dom::element v, const std::string& name, std::string_view what) {
  ConstraintSpec spec{kind, {std::string(get_string(v, name))}};
  return checked(std::move(spec), v, name, what);
}

ConstraintSpec read_choice(simdjson::dom::element v, const std::string& name) {
  std::vector<std::string> choices;
  simdjson::dom::array list;
  if (v.get_array().get(list) != simdjson::SUCCESS) fail_field(name, "a non-empty list of strings", v);
  for (simdjson::dom::element e : list) {
    if (!e.is_string()) fail_field(name, "a non-empty list of strings", v);
    choices.emplace_back(get_string(e, name));
  }
  if (choices.empty()) fail_field(name, "a non-empty list of strings", v);
  return {ConstraintSpec::Kind::kChoice, std::move(choices)};
}

// One constraint kind from (kind, value); kNone for kinds that constrain nothing.
ConstraintSpec read_kind(std::string_view kind, simdjson::dom::element v, const std::string& name) {
  if (kind == "regex") return read_text(ConstraintSpec::Kind::kRegex, v, name, "a regular expression");
  if (kind == "grammar") return read_text(ConstraintSpec::Kind::kGbnf, v, name, "a GBNF grammar");
  if (kind == "choice") return read_choice(v, name);
  if (kind == "json") return read_schema(v, name);
  if (kind == "json_object" && v.is_bool() && !bool(v)) return {};
  return json_object_constraint();
}

void set_once(SamplingParams& out, ConstraintSpec spec, const std::string& name, simdjson::dom::element v) {
  if (out.constraint.is_set()) fail_field(name, "the only structured-output constraint of the request", v);
  out.constraint = std::move(spec);
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
      set_once(out, json_object_constraint(), name, *v);
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
