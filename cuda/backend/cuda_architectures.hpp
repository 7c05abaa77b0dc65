// What a build's kernels were compiled for, as cbatch --version says it. The build records the CUDA
// architectures of the library that holds the kernels (CMake's CUDA_ARCHITECTURES of cbatch_cuda, special
// values resolved at configure time: cmake/cuda_archs.cmake), and this turns them into what the binary holds.
// Host-only, no CUDA include.
#pragma once
#include <string>
#include <string_view>

namespace cbatch {

// "80-virtual,90-real" (CMake's entries, separated by commas or semicolons) -> "compute_80 PTX, sm_90": an
// "-real" entry is machine code (sm_), a "-virtual" one PTX (compute_), a bare one both, in CMake's order;
// an entry of another form is kept as it is.
std::string describe_cuda_architectures(std::string_view archs);

}  // namespace cbatch
