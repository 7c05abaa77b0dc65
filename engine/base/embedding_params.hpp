// What an embedding request asks beyond its tokens: how the final hidden states of each input become one
// vector (mean of all rows, the first row ([CLS]), or the last row), whether that vector is scaled to unit
// length, and how many of its leading dimensions are kept (Matryoshka; 0 = all, then renormalised).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cbatch {

enum class Pooling : uint8_t { kMean, kCls, kLast };

inline std::string_view pooling_name(Pooling p) {
  return p == Pooling::kMean ? "mean" : p == Pooling::kCls ? "cls" : "last";
}

// "mean", "cls", "last"; nullopt for "" (or any other name: the CLI checks the names).
inline std::optional<Pooling> pooling_from_name(std::string_view name) {
  if (name == "mean") return Pooling::kMean;
  if (name == "cls") return Pooling::kCls;
  if (name == "last") return Pooling::kLast;
  return std::nullopt;
}

// How a score or rerank request pooled as embeddings turns its vectors into pair scores: a cross-encoder's
// classifier logit per pair (its sigmoid unless the model says Identity), or the cosine of a bi-encoder's
// two embeddings (inputs: the num_queries text_1 first, then each text_2).
enum class PairScoring : uint8_t { kNone, kClassifier, kCosine };

struct EmbeddingParams {
  Pooling pooling = Pooling::kMean;
  bool normalize = true;
  int dimensions = 0;            // 0: the model's width
  bool base64 = false;           // OpenAI encoding_format "base64": little-endian float32 bytes
  std::vector<int> truncated_tokens;  // (inputs) tokens dropped to fit the length limit (special tokens kept)
  PairScoring pair_scoring = PairScoring::kNone;
  bool score_sigmoid = true;     // kClassifier: sigmoid of the logit, else the logit
  int num_queries = 0;           // kCosine: the leading inputs that are text_1
};

// What an embedding line asks, before the model fills in the rest (engine/io/embedding_builder.cpp): its
// inputs (texts, or token id lists; an OpenAI line may have several, each embedded on its own) and options.
struct EmbeddingInput {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> token_ids;
  std::optional<Pooling> pooling;  // --pooling; else the model's sentence-transformers pooling
  int truncate_prompt_tokens = 0;  // 0: the model's max_seq_length (else its context)
  int dimensions = 0;              // 0: all
  bool base64 = false;
  bool decoder_allowed = false;    // --task embed: a decoder model may embed (causal; usually last pooling)
};

}  // namespace cbatch
