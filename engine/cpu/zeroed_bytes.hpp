// A zeroed array from calloc: large ones are fresh zero pages that become resident only when written, so
// the KV cache and the state slots cost memory for what is in use, not for the whole reservation.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/base/error.hpp"

namespace cbatch {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using ZeroedBytes = std::unique_ptr<uint8_t[], FreeDeleter>;

// n zeroed bytes (at least 1); `what` names the use in the error when memory runs out.
inline ZeroedBytes calloc_bytes(size_t n, const char* what) {
  auto* p = static_cast<uint8_t*>(std::calloc(n > 0 ? n : 1, 1));
  if (p == nullptr) throw Error("cannot allocate " + std::to_string(n) + " bytes for the " + what);
  return ZeroedBytes(p);
}

}  // namespace cbatch
