// The bodies of /v1/score ({"text_1", "text_2"}: each a string or a list of strings; 1:1, 1:N or N:N as
// vLLM takes them) and /v1/rerank ({"query", "documents", "top_n"}) lines, read into a ScoreInput. Bad
// shapes (no documents, lists of different lengths) throw FieldError naming the field and value.
#pragma once
#include "engine/base/request.hpp"
#include "engine/io/json_field.hpp"

namespace cbatch {

inline constexpr std::string_view kScoreUrl = "/v1/score";
inline constexpr std::string_view kRerankUrl = "/v1/rerank";

ScoreInput read_score_body(const FieldSet& body);
ScoreInput read_rerank_body(const FieldSet& body);

}  // namespace cbatch
