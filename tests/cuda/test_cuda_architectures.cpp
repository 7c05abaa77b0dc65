// cbatch --version's account of the kernels' architectures (cuda_architectures.hpp): CMake's entries as what
// the fatbinary holds. Part of the host suite.
#include <doctest/doctest.h>

#include "cuda/backend/cuda_architectures.hpp"

namespace cbatch {

TEST_SUITE("host") {
TEST_CASE("CUDA architectures described as the binary holds them: machine code, PTX, both") {
  CHECK(describe_cuda_architectures("80-virtual") == "compute_80 PTX");
  CHECK(describe_cuda_architectures("90-real") == "sm_90");
  CHECK(describe_cuda_architectures("90") == "sm_90, compute_90 PTX");  // a bare entry is both
  CHECK(describe_cuda_architectures("80-virtual,90-real") == "compute_80 PTX, sm_90");
  CHECK(describe_cuda_architectures("80-virtual;90a-real") == "compute_80 PTX, sm_90a");
  // "all" resolved at configure time (cmake/cuda_archs.cmake): machine code for each, PTX for the newest.
  CHECK(describe_cuda_architectures("75-real,80-real,86-real,89-real,90") ==
        "sm_75, sm_80, sm_86, sm_89, sm_90, compute_90 PTX");
  CHECK(describe_cuda_architectures("native") == "native");  // never recorded so; kept, not guessed
  CHECK(describe_cuda_architectures("") == "no architecture recorded");
}
}

}  // namespace cbatch
