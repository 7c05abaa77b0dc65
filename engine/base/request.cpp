#include "engine/base/request.hpp"

namespace cbatch {
namespace {

std::string indexed(const std::string& field, size_t count, size_t i) {
  return count == 1 ? field : field + "[" + std::to_string(i) + "]";
}

}  // namespace

std::string embedding_input_field(RequestForm form, const EmbeddingParams& params, size_t num_inputs, size_t i) {
  const bool is_rerank = form == RequestForm::kOpenAIRerank;
  if (form == RequestForm::kOpenAIScore || is_rerank) {
    const std::string second = is_rerank ? "body.documents[" : "body.text_2[";
    if (params.pair_scoring != PairScoring::kCosine) return second + std::to_string(i) + "]";
    const size_t num_queries = static_cast<size_t>(params.num_queries);
    if (i >= num_queries) return second + std::to_string(i - num_queries) + "]";
    return is_rerank ? "body.query" : indexed("body.text_1", num_queries, i);
  }
  if (form == RequestForm::kOpenAIEmbeddings) return indexed("body.input", num_inputs, i);
  return indexed("input", num_inputs, i);
}

}  // namespace cbatch
