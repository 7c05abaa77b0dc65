// The one exception type for user-facing failures (bad flags, unreadable or malformed model files, I/O).
// cmd/ catches it, prints the message once on stderr and exits with status 1. Internal invariants use
// assert instead.
#pragma once
#include <stdexcept>
#include <string>

namespace cbatch {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace cbatch
