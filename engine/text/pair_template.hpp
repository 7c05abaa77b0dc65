// What a tokenizer.json post-processor puts around encoded text, shared by the WordPiece and Unigram
// readers: TemplateProcessing ("single": special tokens before and after sequence A; "pair": the items of
// a pair with their type ids, 0 then 1), BertProcessing ([CLS] A [SEP], pair [CLS] A [SEP] B [SEP] with
// type 1 on B) and RobertaProcessing (<s> A </s>, pair <s> A </s></s> B </s>, all type 0).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/base/json_file.hpp"
#include "engine/text/tokenizer.hpp"

namespace cbatch {

// One item of a post-processor's pair template: a special token, or sequence A or B; its token type.
struct PairTemplateItem {
  int32_t special_id = -1;  // -1: a sequence
  int sequence = 0;         // 0: A, 1: B (when special_id is -1)
  int type_id = 0;          // 0 or 1; the template's type ids never go back from 1 to 0
};

struct PostProcessorSpec {
  std::vector<int32_t> prefix_ids;  // before a single text ([CLS], <s>)
  std::vector<int32_t> suffix_ids;  // ... and after it ([SEP], </s>)
  std::vector<PairTemplateItem> pair_template = {{-1, 0, 0}, {-1, 1, 1}};  // A then B without a post-processor
};

// The id of a special token's text; fails through f (naming key) when the vocabulary lacks it.
using SpecialIdOf = std::function<int32_t(const JsonFields& f, const char* key, const std::string& text)>;

// Fills out from the post_processor object p; throws cbatch::Error naming the field when it is not one
// of the three kinds or is malformed.
void read_post_processor(const JsonFields& p, const SpecialIdOf& id_of, PostProcessorSpec& out);

// A pair joined by the template; encode(0) and encode(1) give the two texts' ids without special tokens.
EncodedPair join_pair(const std::vector<PairTemplateItem>& pair_template,
                      const std::function<std::vector<int32_t>(int sequence)>& encode);

}  // namespace cbatch
