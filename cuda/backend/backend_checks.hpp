// What the CUDA backend checks before it touches the device: that it implements the model's description
// (checked_config) and that the options make sense together and on this GPU (check_options). Both throw
// cbatch::Error naming the value.
#pragma once
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend_options.hpp"
#include "engine/model/model_config.hpp"

namespace cbatch {

[[noreturn]] void unsupported(const std::string& what);

// The distinct windows of the layers, in order of first use (0: a layer without one): each kind has its own
// decode split and stream plan (the keys a decode row sees depend on it).
std::vector<int> window_kinds(const ModelConfig& c);

// c itself, or throws "the CUDA backend does not support ..." for what no kernel implements.
const ModelConfig& checked_config(const ModelConfig& c);

void check_options(const CudaBackendOptions& o);

}  // namespace cbatch
