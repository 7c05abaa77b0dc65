// A read-only memory mapping of a whole file (RAII). Model loaders point TensorViews into it and keep
// it alive through Model::storage. An empty file maps to {nullptr, 0}. Open and map failures throw
// cbatch::Error naming the path and the system error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cbatch {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Gives back the memory of the whole pages inside [begin, begin + bytes) of the mapping (bytes read once
  // and converted: a pre-quantized checkpoint's parts). Safe: a later read maps them from the file again.
  void release(const uint8_t* begin, size_t bytes) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;  // (size_) bytes, PROT_READ
  size_t size_ = 0;
};

}  // namespace cbatch
