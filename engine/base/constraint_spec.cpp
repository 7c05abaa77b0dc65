// The constraint key.
#include "engine/base/constraint_spec.hpp"

namespace cbatch {

std::string ConstraintSpec::key() const {
  std::string k = std::to_string(static_cast<int>(kind));
  for (const std::string& t : texts) {  // appended piece by piece: GCC 12 warns falsely on "..." + string&&
    k += ':';
    k += std::to_string(t.size());
    k += ':';
    k += t;
  }
  return k;
}

}  // namespace cbatch
