// The element type of the paged KV cache, as the host code sees it: the compute type T, or FP8 E4M3 bytes
// (--kv-cache-dtype fp8, engine/model/fp8.hpp) with one fp32 scale for K and one for V per layer. A stored
// byte b stands for fp8_e4m3_to_float(b) * scale; a value x is stored as fp8_e4m3_from_float(x / scale).
// The scales live on the device, so that a checkpoint's calibrated scales could fill them; none is read
// from checkpoints yet, and every scale is 1.0 (vLLM's default when a checkpoint has none).
#pragma once
#include <cstdint>
#include <type_traits>

namespace cbatch {

using Fp8E4M3 = uint8_t;  // one E4M3 code, the cache element of --kv-cache-dtype fp8

template <typename KV>
inline constexpr bool kFp8Kv = std::is_same_v<KV, Fp8E4M3>;

// KV in a launcher's parameter list where it must not be deduced from the argument (a null cache pointer
// of a test still picks KV = T): std::type_identity_t, which the CUDA files' C++17 lacks.
template <typename KV>
struct KvIdentity {
  using type = KV;
};
template <typename KV>
using KvElement = typename KvIdentity<KV>::type;

// A layer's FP8 cache scales: device pointers to one fp32 each (host pointers in the emulated tests).
// Unused (null) where the cache holds T.
struct KvScales {
  const float* k = nullptr;
  const float* v = nullptr;
};

}  // namespace cbatch
