// The tokenizer interface: text -> ids and id -> bytes. Implementations: SentencePiece-style BPE with
// byte fallback (llama), byte-level BPE (gpt2), and a byte tokenizer for dummy models. Decoding works
// piece by piece so the engine can stream text and find stop strings; pieces are raw bytes and may
// split a UTF-8 character (byte-fallback tokens), the writer repairs invalid UTF-8 at output time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

// Token types as ggml numbers them (tokenizer.ggml.token_type); Hugging Face added tokens map to
// kControl (special) and kUserDefined (not special).
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Two texts joined as one input for a cross-encoder ([CLS] a [SEP] b [SEP]); token type 1 runs from
// second_segment to the end, type 0 before it.
struct EncodedPair {
  std::vector<int32_t> ids;
  int second_segment = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // add_special: prepend BOS (and append EOS) as the model's add_bos/add_eos flags say. Text of special
  // and added tokens ("<|im_start|>", "<s>") always becomes their ids, as Hugging Face tokenizers do.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
  // A pair as the post-processor's pair template joins it; throws cbatch::Error for a tokenizer that has
  // no pair form (only encoders' tokenizers do).
  virtual EncodedPair encode_pair(std::string_view a, std::string_view b) const;
  // The bytes token `id` contributes when it follows token `prev` (-1 at the start). Control and
  // special tokens give "". SentencePiece drops the leading space of the first piece after BOS.
  virtual std::string decode_piece(int32_t prev, int32_t id) const = 0;
  virtual int vocab_size() const = 0;
  // The token's text as the vocabulary stores it ("<s>", "<|im_end|>", "Ġthe"); "" when unknown.
  virtual std::string token_text(int32_t /*id*/) const { return ""; }
  // "llama" (SentencePiece BPE), "gpt2" (byte-level BPE) or "byte" (dummy models).
  virtual std::string_view kind() const = 0;

  int32_t bos_id() const { return bos_id_; }
  // End of text and end of turn tokens; sampling any of them stops a request (unless ignore_eos).
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool is_eos(int32_t id) const;

  // Concatenated pieces of ids, the first one following `prev`.
  std::string decode(const std::vector<int32_t>& ids, int32_t prev = -1) const;

 protected:
  int32_t bos_id_ = -1;
  std::vector<int32_t> eos_ids_;
};

}  // namespace cbatch
