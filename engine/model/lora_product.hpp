// The products of a layer a LoRA pair adds to (lora_adapter.hpp, lora_targets.hpp), shared by the loader and
// both backends, which keep their adapters by (layer, product).
#pragma once
#include <cstdint>

namespace cbatch {

// The products of a layer that adapters add to: attention's q|k|v (Qwen3.5's gated q: 2 q_dim rows, per head
// [q | gate]) and output; the MLP's gate|up (a plain MLP's up alone) and down; a DeltaNet's q|k|v|z, b|a and
// output; a short conv's and a Mamba-2 mixer's in and out projections.
enum class LoraProduct : uint8_t {
  kQkv, kO, kGateUp, kDown, kSsmQkvz, kSsmBa, kSsmOut, kShortConvIn, kShortConvOut, kMambaIn, kMambaOut
};
constexpr int kNumLoraProducts = 11;

}  // namespace cbatch
