// A file under the system temp directory with given bytes (its name ends with `suffix`), removed when the test
// ends.
#pragma once
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace cbatch::test {

class TempFile {
 public:
  explicit TempFile(std::string_view content, std::string_view suffix = ".jsonl") {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("cbatch_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + std::string(suffix)))
                .string();
    write(content);
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(std::string_view content) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  }
  std::string read() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace cbatch::test
