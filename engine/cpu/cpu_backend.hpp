// The CPU backend: fp32 weights (matrices stored in GGUF blocks stay in them and are decoded during each
// product, to the same fp32 values; or, with int8_products, multiplied as 8-bit integers against each
// activation row quantized on its own), a paged fp32 or bf16 KV cache, and a Llama forward pass over ragged
// batches.
// Batch-invariant by construction: every output element is reduced in a fixed order that does not
// depend on which other rows share the batch, so greedy outputs are identical across modes, budgets,
// chunk sizes and batch sizes.
#pragma once
#include <memory>

#include "engine/backend/backend.hpp"
#include "engine/cpu/cpu_backend_options.hpp"
#include "engine/model/model.hpp"

namespace cbatch {

// Packs copies of the model's views: the model keeps its tensors (another backend can be built from it).
std::unique_ptr<Backend> make_cpu_backend(const Model& model, const CpuBackendOptions& options);
// Packs `tensors` (take_tensors(model)): the buffers the loader made are freed layer by layer as they are
// packed, except those the backend still reads (an embedding table kept as stored).
std::unique_ptr<Backend> make_cpu_backend(const Model& model, ModelTensors tensors, const CpuBackendOptions& options);

}  // namespace cbatch
