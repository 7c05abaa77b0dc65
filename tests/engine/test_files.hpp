// Test data helpers: tiny-spm, the project's own small Llama in three formats (CBATCH_TINY_SPM_DIR, written
// by ctest's fixture tiny_spm: tools/tiny_spm/make_tiny_spm.py), paths under the optional shared data
// directory (CBATCH_SHARED_DIR: extra cases only, through have_files()) and the source tree
// (CBATCH_SOURCE_DIR), whole-file reads, and temporary files removed at scope exit.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "engine/base/error.hpp"
#include "temp_file.hpp"

namespace cbatch::test {

inline std::string shared_path(const std::string& relative) {
  return std::string(CBATCH_SHARED_DIR) + "/" + relative;
}

// A file of tiny-spm; fails the test (naming the command that writes it) when it is missing.
inline std::string tiny_spm_path(const std::string& relative) {
  const std::string path = std::string(CBATCH_TINY_SPM_DIR) + "/" + relative;
  REQUIRE_MESSAGE(std::filesystem::exists(path), path << " is missing: ctest writes it (fixture tiny_spm), or run "
                                                      << "python3 tools/tiny_spm/make_tiny_spm.py "
                                                      << CBATCH_TINY_SPM_DIR);
  return path;
}

inline std::string source_path(const std::string& relative) {
  return std::string(CBATCH_SOURCE_DIR) + "/" + relative;
}

// False (with a skip message) when any of the files is missing.
inline bool have_files(std::initializer_list<std::string> paths) {
  for (const std::string& path : paths) {
    if (!std::filesystem::exists(path)) {
      MESSAGE("SKIPPED: test data " << path << " is missing");
      return false;
    }
  }
  return true;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A temporary directory (optionally a copy of `source`), removed with its contents at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& source = "") {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("cbatch_test_dir_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::create_directories(path_);
    if (!source.empty()) std::filesystem::copy(source, path_, std::filesystem::copy_options::recursive);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(file(name), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::string read(const std::string& name) const { return read_bytes(file(name)); }

 private:
  std::string path_;
};

// The message of the cbatch::Error that fn throws; fails the test when it throws nothing.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected a cbatch::Error");
  return "";
}

// A llama.cpp vocab test: the texts of `vocab`.inp (separated by "\n__ggml_vocab_test__\n") and the token ids
// of `vocab`.out (a line of ids per text); fails the test unless they pair up and there are more than 40.
struct VocabSuite {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};

inline VocabSuite read_vocab_suite(const std::string& vocab) {
  VocabSuite suite;
  const std::string text = read_bytes(vocab + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t begin = 0;
  for (size_t at; (at = text.find(sep, begin)) != std::string::npos; begin = at + sep.size()) {
    suite.texts.push_back(text.substr(begin, at - begin));
  }
  std::istringstream in(read_bytes(vocab + ".out"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::vector<int32_t> ids;
    for (int32_t id; fields >> id;) ids.push_back(id);
    suite.ids.push_back(ids);
  }
  REQUIRE(suite.texts.size() == suite.ids.size());
  REQUIRE(suite.texts.size() > 40);
  return suite;
}

}  // namespace cbatch::test
