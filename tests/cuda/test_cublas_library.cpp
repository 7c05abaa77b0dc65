// cublas_library(): cuBLAS is not in the process until the first call, then every function resolves.
// In the "host" suite, which runs without a GPU too.
#include <doctest/doctest.h>

#include <string>

#include "cuda/common/cublas_library.hpp"
#include "tests/cuda/library_probe.hpp"

namespace cbatch::test {

namespace {

bool cublas_in_process() { return library_in_process("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)); }

// Taken during static initialisation, before main and any test has run.
const bool kCublasLoadedAtStart = cublas_in_process();

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("cuBLAS is opened on first use, not at process start") {
    CHECK_FALSE(kCublasLoadedAtStart);
    const CublasLibrary& lib = cublas_library();
    CHECK(cublas_in_process());
    CHECK(&cublas_library() == &lib);
    CHECK(resolved(lib.create));
    CHECK(resolved(lib.destroy));
    CHECK(resolved(lib.set_stream));
    CHECK(resolved(lib.get_stream));
    CHECK(resolved(lib.set_math_mode));
    CHECK(resolved(lib.set_workspace));
    CHECK(resolved(lib.status_string));
    CHECK(resolved(lib.gemm_ex));
    // A call through the table that needs no GPU: the library describes its own status codes.
    const std::string unsupported = lib.status_string(CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK_FALSE(unsupported.empty());
    CHECK(unsupported != lib.status_string(CUBLAS_STATUS_SUCCESS));
  }
}

}  // namespace cbatch::test
