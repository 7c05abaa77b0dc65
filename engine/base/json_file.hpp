// Typed access to the fields of a JSON configuration file (config.json, tokenizer.json, ...) with
// simdjson's DOM. Every failure throws cbatch::Error naming the file and the field by its full path
// ("'dir/config.json': field 'rope_scaling.factor' must be a number"). A JSON null counts as absent.
#pragma once
#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cbatch {

class JsonFields {
 public:
  JsonFields(simdjson::dom::element object, std::string path, std::string prefix = "")
      : object_(object), path_(std::move(path)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const;
  bool is_null(const char* key) const;  // present with the value null (which has() counts as absent)
  simdjson::dom::element at(const char* key) const;  // required
  int64_t get_int(const char* key) const;
  int get_size(const char* key) const;  // a positive int32
  int get_size(const char* key, int fallback) const;
  double get_number(const char* key, double fallback) const;
  bool get_bool(const char* key, bool fallback) const;
  std::string get_string(const char* key) const;
  std::string get_string(const char* key, const std::string& fallback) const;
  std::vector<int32_t> get_ids(const char* key) const;  // an int or a list of ints; empty when absent
  JsonFields object(const char* key) const;             // a nested object, named "key." in messages
  simdjson::dom::array array(const char* key) const;
  simdjson::dom::object members(const char* key) const;  // an object's key/value pairs
  // The i-th element of an array field as an object, named "key[i]." in messages.
  JsonFields item(const char* key, size_t index, simdjson::dom::element value) const;
  std::string name(const char* key) const { return prefix_ + key; }  // the field's full name
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const char* key, const std::string& problem) const;

 private:
  simdjson::dom::element object_;
  std::string path_;
  std::string prefix_;
};

// A parsed JSON file; the fields stay valid while it lives.
class JsonFile {
 public:
  explicit JsonFile(const std::string& path);  // throws when unreadable, invalid or not an object
  JsonFields fields() const { return JsonFields(root_, path_); }
  const std::string& path() const { return path_; }

 private:
  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element root_;
  std::string path_;
};

}  // namespace cbatch
