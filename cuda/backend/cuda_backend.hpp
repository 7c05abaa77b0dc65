// Host-only entry points of the CUDA backend: the backend factory, with device discovery
// (cuda_device.hpp) and its options (cuda_backend_options.hpp). Includes no CUDA header, so cmd/ can call it
// from plain C++; a build without CUDA includes it for the option types only (cmd/ still parses the CUDA
// flags there, to refuse them by name).
#pragma once
#include <memory>

#include "cuda/backend/cuda_backend_options.hpp"
#include "cuda/backend/cuda_device.hpp"
#include "engine/backend/backend.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// Uploads the model's weights (converted to the compute dtype) and builds the workspace.
// Throws cbatch::Error with the numbers when the model does not fit.
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const CudaBackendOptions& options);

}  // namespace cbatch
