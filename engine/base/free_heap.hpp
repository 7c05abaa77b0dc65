// Gives the heap's free pages back to the system after many buffers were freed at once (a pre-quantized
// checkpoint's blocks once a backend has packed them: take_tensors, model.hpp). Freed chunks amid the heap
// otherwise stay resident, kept for later allocations; glibc's malloc_trim returns their whole pages
// (elsewhere: nothing to do).
#pragma once

namespace cbatch {

void give_back_free_heap();

}  // namespace cbatch
