// Turns a parsed input line into a Request the scheduler can run: tokenizes the prompt (or renders and
// tokenizes the chat), checks ids against the vocabulary and the length against the model's context,
// and derives the request's RNG seed. Failures become a RequestError for that line.
#pragma once
#include <cstdint>
#include <variant>

#include "engine/model.hpp"
#include "engine/request.hpp"

namespace cbatch {

std::variant<Request, RequestError> build_request(RequestInput&& input, int64_t index, const Model& model,
                                                  uint64_t global_seed);

}  // namespace cbatch
