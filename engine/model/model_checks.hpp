// What every format loader shares (model_checks.cpp): the config sanity check made before any tensor
// list is built, row slices of fused tensors, and the dominant dtype. validate_model_tensors, run on
// every loaded model, is declared in model.hpp.
#pragma once
#include <cstdint>
#include <string>

#include "engine/model/model.hpp"

namespace cbatch {

// The most experts a mixture-of-experts layer may have (sane-size bound, like the other limits).
constexpr int kMaxExperts = 1 << 12;

// Rows [row_begin, row_begin + num_rows) of a stored tensor as a view of its own (a fused projection's
// parts). Throws when the rows are out of range.
TensorView row_slice(const TensorView& tensor, int64_t row_begin, int64_t num_rows);

// The dtype holding the most weight elements (a Q4_0 file keeps its norms in F32), for inspect.
std::string dominant_dtype(const ModelTensors& tensors);

// Positive sizes within sane limits, heads dividing evenly, an even head_dim. `path` names the file.
void check_model_config(const ModelConfig& config, const std::string& path);

}  // namespace cbatch
