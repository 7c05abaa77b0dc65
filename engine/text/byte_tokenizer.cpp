// The tokenizer of dummy models (kind "byte"): every byte of the text is its own id (0..255), so any
// text round-trips without a vocabulary file. BOS/EOS come from the model config; when absent they are
// the last two ids (vocab - 2, vocab - 1). Special ids decode to "" even where they collide with a byte
// id (Hugging Face configs often say bos 1, eos 2); ids 256.. other than BOS/EOS decode to "".
#include "engine/base/error.hpp"
#include "engine/text/tokenizer_loaders.hpp"

namespace cbatch {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  ByteTokenizer(int vocab_size, int32_t bos_id, std::vector<int32_t> eos_ids) : vocab_size_(vocab_size) {
    bos_id_ = bos_id;
    eos_ids_ = std::move(eos_ids);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() + 1);
    if (add_special) ids.push_back(bos_id_);
    for (char c : text) ids.push_back(static_cast<uint8_t>(c));
    return ids;
  }

  std::string decode_piece(int32_t /*prev*/, int32_t id) const override {
    if (id < 0 || id >= vocab_size_) {
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                  std::to_string(vocab_size_ - 1) + ")");
    }
    if (id >= 256 || id == bos_id_ || is_eos(id)) return "";
    return std::string(1, static_cast<char>(id));
  }

  int vocab_size() const override { return vocab_size_; }
  std::string_view kind() const override { return "byte"; }

 private:
  int vocab_size_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer(int vocab_size, int32_t bos_id, std::vector<int32_t> eos_ids) {
  if (vocab_size < 258) {
    throw Error("the byte tokenizer of dummy models needs vocab_size >= 258, got " +
                std::to_string(vocab_size));
  }
  if (bos_id < 0) bos_id = vocab_size - 2;
  if (eos_ids.empty()) eos_ids.push_back(vocab_size - 1);
  for (int32_t id : eos_ids) {
    if (id < 0 || id >= vocab_size) {
      throw Error("eos token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(vocab_size));
    }
  }
  if (bos_id >= vocab_size) {
    throw Error("bos token id " + std::to_string(bos_id) + " is outside the vocabulary of " +
                std::to_string(vocab_size));
  }
  return std::make_unique<ByteTokenizer>(vocab_size, bos_id, std::move(eos_ids));
}

}  // namespace cbatch
