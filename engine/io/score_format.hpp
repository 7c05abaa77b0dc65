// The response bodies of /v1/score and /v1/rerank lines, shaped as vLLM's ScoreResponse ({"id", "object":
// "list", "created", "model", "data": [{"index", "object": "score", "score"}], "usage"}) and RerankResponse
// ({"id", "model", "usage", "results": [{"index", "document": {"text"}, "relevance_score"}]}, best first,
// the first top_n when it is set). A result's samples hold the pairs' scores by pair index.
#pragma once
#include <cstdint>
#include <string>

#include "engine/base/request_result.hpp"
#include "engine/io/json_writer.hpp"

namespace cbatch {

// id: the line's batch id ("cbatch-<line>"); created_s: unix seconds; model: the body's "model".
void write_score_body(JsonWriter& w, const RequestResult& r, const std::string& id, int64_t created_s,
                      const std::string& model);

}  // namespace cbatch
