#include "engine/core/engine_config.hpp"

#include "engine/base/elide.hpp"
#include "engine/base/error.hpp"

namespace cbatch {

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::kContinuous: return "continuous";
    case Mode::kStatic: return "static";
    case Mode::kSequential: return "sequential";
  }
  return "?";
}

Mode parse_mode(std::string_view name) {
  if (name == "continuous") return Mode::kContinuous;
  if (name == "static") return Mode::kStatic;
  if (name == "sequential") return Mode::kSequential;
  throw Error("unknown mode '" + elide(name) + "' (expected continuous, static or sequential)");
}

}  // namespace cbatch
