// Turns a parsed input line into a Request the scheduler can run: tokenizes the prompt (or renders and
// tokenizes the chat with the run's ChatFormat, which also adds the end-of-turn token as a stop), checks
// ids against the vocabulary and the length against the model's context, and derives the request's RNG
// seed. Failures become a RequestError for that line.
#pragma once
#include <cstdint>
#include <variant>

#include "engine/text/chat_format.hpp"
#include "engine/io/rerank_template.hpp"
#include "engine/model/model.hpp"
#include "engine/base/request.hpp"

namespace cbatch {

// `chat` may be null (then chat messages are an error for their line).
// An error for the line of `input` (message prefixed with "line N: "); index -1 until the source numbers it.
RequestError make_input_error(const RequestInput& input, int64_t index, const std::string& message);
// The error of a line whose id an earlier line (first_line) already used (index -1: the source sets it).
RequestError make_duplicate_id_error(const RequestInput& input, int64_t first_line);

// `rerank`: the run's reranker (--reranker); null: score and rerank lines are an error for their line.
std::variant<Request, RequestError> build_request(RequestInput&& input, int64_t index, const Model& model,
                                                  const ChatFormat* chat, uint64_t global_seed,
                                                  const RerankFormat* rerank = nullptr);

}  // namespace cbatch
