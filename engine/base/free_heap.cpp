// The heap's free pages back to the system (free_heap.hpp).
#include "engine/base/free_heap.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace cbatch {

void give_back_free_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace cbatch
