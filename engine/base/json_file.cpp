// JsonFields and JsonFile: typed getters whose errors name the file and the field.
#include "engine/base/json_file.hpp"

#include "engine/base/error.hpp"

namespace cbatch {

using simdjson::dom::element;

bool JsonFields::has(const char* key) const {
  element e;
  return !object_[key].get(e) && !e.is_null();
}

bool JsonFields::is_null(const char* key) const {
  element e;
  return !object_[key].get(e) && e.is_null();
}

element JsonFields::at(const char* key) const {
  element e;
  if (object_[key].get(e) || e.is_null()) fail(key, "is missing");
  return e;
}

int64_t JsonFields::get_int(const char* key) const {
  int64_t v;
  if (at(key).get_int64().get(v)) fail(key, "must be an integer");
  return v;
}

int JsonFields::get_size(const char* key) const {
  const int64_t v = get_int(key);
  if (v <= 0 || v > INT32_MAX) fail(key, "must be a positive integer, got " + std::to_string(v));
  return static_cast<int>(v);
}

int JsonFields::get_size(const char* key, int fallback) const { return has(key) ? get_size(key) : fallback; }

double JsonFields::get_number(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const element e = at(key);
  if (e.is_double()) return e.get_double().value_unsafe();
  if (e.is_int64()) return static_cast<double>(e.get_int64().value_unsafe());
  if (e.is_uint64()) return static_cast<double>(e.get_uint64().value_unsafe());
  fail(key, "must be a number");
}

bool JsonFields::get_bool(const char* key, bool fallback) const {
  bool v = fallback;
  if (has(key) && at(key).get_bool().get(v)) fail(key, "must be true or false");
  return v;
}

std::string JsonFields::get_string(const char* key) const {
  std::string_view v;
  if (at(key).get_string().get(v)) fail(key, "must be a string");
  return std::string(v);
}

std::string JsonFields::get_string(const char* key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

std::vector<int32_t> JsonFields::get_ids(const char* key) const {
  std::vector<int32_t> ids;
  if (!has(key)) return ids;
  const element e = at(key);
  auto to_id = [&](element item) {
    int64_t v;
    if (item.get_int64().get(v) || v < 0 || v > INT32_MAX) fail(key, "must hold non-negative integer token ids");
    return static_cast<int32_t>(v);
  };
  simdjson::dom::array items;
  if (e.get_array().get(items)) {
    ids.push_back(to_id(e));
  } else {
    for (element item : items) ids.push_back(to_id(item));
  }
  return ids;
}

JsonFields JsonFields::object(const char* key) const {
  const element e = at(key);
  if (!e.is_object()) fail(key, "must be an object");
  return JsonFields(e, path_, prefix_ + key + ".");
}

simdjson::dom::array JsonFields::array(const char* key) const {
  simdjson::dom::array items;
  if (at(key).get_array().get(items)) fail(key, "must be an array");
  return items;
}

simdjson::dom::object JsonFields::members(const char* key) const {
  simdjson::dom::object items;
  if (at(key).get_object().get(items)) fail(key, "must be an object");
  return items;
}

JsonFields JsonFields::item(const char* key, size_t index, simdjson::dom::element value) const {
  const std::string indexed = std::string(key) + "[" + std::to_string(index) + "]";
  if (!value.is_object()) fail(indexed.c_str(), "must be an object");
  return JsonFields(value, path_, prefix_ + indexed + ".");
}

void JsonFields::fail(const char* key, const std::string& problem) const {
  throw Error("'" + path_ + "': field '" + prefix_ + key + "' " + problem);
}

JsonFile::JsonFile(const std::string& path) : parser_(std::make_unique<simdjson::dom::parser>()), path_(path) {
  if (auto error = parser_->load(path).get(root_)) {
    throw Error("cannot read '" + path + "': " + simdjson::error_message(error));
  }
  if (!root_.is_object()) throw Error("'" + path + "' must hold a JSON object");
}

}  // namespace cbatch
