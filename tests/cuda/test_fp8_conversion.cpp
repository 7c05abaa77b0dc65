// fp8.hpp's E4M3 conversion is bit for bit CUDA's (__nv_cvt_float_to_fp8 with __NV_SATFINITE, the
// conversion the kernels' hardware path and cuBLASLt's inputs use), on the host: every float whose low 7
// bits are a fixed pattern (2^25 of them, all exponents and signs), and every code back to float.
// In the "host" suite, which runs without a GPU too.
#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "engine/model/fp8.hpp"

namespace cbatch::test {

TEST_SUITE("host") {
TEST_CASE("fp8 e4m3 conversion equals CUDA's") {
  uint64_t mismatches = 0;
  uint32_t first_mismatch = 0;
  for (uint64_t high = 0; high < (uint64_t{1} << 25); ++high) {
    for (uint32_t low : {0u, 0x3Fu, 0x40u, 0x41u, 0x7Fu}) {  // exact, below / at / above a half ulp of bit 7
      const uint32_t bits = static_cast<uint32_t>(high << 7) | low;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      const uint8_t ours = fp8_e4m3_from_float(f);
      const uint8_t cuda = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
      if (ours != cuda && mismatches++ == 0) first_mismatch = bits;
    }
  }
  CAPTURE(first_mismatch);
  CHECK(mismatches == 0);
  for (int code = 0; code < 256; ++code) {
    __nv_fp8_e4m3 x;
    x.__x = static_cast<__nv_fp8_storage_t>(code);
    const float cuda = static_cast<float>(x);
    const float ours = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    CAPTURE(code);
    CHECK((ours == cuda || (std::isnan(ours) && std::isnan(cuda))));
  }
}
}

}  // namespace cbatch::test
