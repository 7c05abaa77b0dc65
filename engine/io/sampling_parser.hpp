// Reads the sampling fields of a request (top level in the simple form, inside "body" in the OpenAI
// form) into SamplingParams, with vLLM's names and defaults and range checks that reject absurd values
// instead of clamping them. Unknown fields are left alone.
#pragma once
#include "engine/io/json_field.hpp"
#include "engine/base/request.hpp"
#include "engine/base/sampling_params.hpp"

namespace cbatch {

inline constexpr int64_t kMaxMaxTokens = 1'000'000;

// Throws FieldError naming the first bad field.
void parse_sampling_fields(const FieldSet& fields, const RequestDefaults& defaults,
                           SamplingParams& out);
// The structured-output fields (constraint_parser.cpp); part of parse_sampling_fields.
void parse_constraint_fields(const FieldSet& fields, SamplingParams& out);
// The log-probability fields of a line of this form (logprob_parser.cpp).
void parse_logprob_fields(const FieldSet& fields, RequestForm form, int max_logprobs, SamplingParams& out);

}  // namespace cbatch
