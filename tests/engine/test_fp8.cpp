// fp8.hpp: E4M3 conversions against the format's definition (the CUDA host suite also compares them with
// CUDA's own conversion over every float pattern).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/model/fp8.hpp"

namespace cbatch::test {
namespace {

// The value of an E4M3 code from its definition, in double.
double e4m3_value(int code) {
  const int exponent = (code >> 3) & 15;
  const int mantissa = code & 7;
  const double magnitude = exponent == 0 ? mantissa * std::ldexp(1.0, -9) : (1.0 + mantissa / 8.0) * std::ldexp(1.0, exponent - 7);
  return (code & 0x80) ? -magnitude : magnitude;
}

bool is_nan_code(int code) { return (code & 0x7F) == 0x7F; }

}  // namespace

TEST_CASE("fp8 e4m3: every code decodes to its defined value and encodes back to itself") {
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const float value = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    if (is_nan_code(code)) {
      CHECK(std::isnan(value));
      CHECK(fp8_e4m3_from_float(value) == 0x7F);
      continue;
    }
    CHECK(static_cast<double>(value) == e4m3_value(code));
    const int expected = code == 0x80 ? 0x80 : code;  // -0 stays -0
    CHECK(fp8_e4m3_from_float(value) == expected);
  }
  CHECK(fp8_e4m3_to_float(0x7E) == kFp8E4M3Max);
}

TEST_CASE("fp8 e4m3: rounds to nearest, ties to the even code, and saturates") {
  // Between each pair of neighbouring positive codes: a value just below the midpoint goes down, just above
  // goes up, and the midpoint itself goes to the even code.
  for (int code = 0; code < 0x7E; ++code) {
    CAPTURE(code);
    const double lo = e4m3_value(code);
    const double hi = e4m3_value(code + 1);
    const double mid = (lo + hi) / 2;
    const float below = std::nextafter(static_cast<float>(mid), 0.0f);
    const float above = std::nextafter(static_cast<float>(mid), 1000.0f);
    CHECK(fp8_e4m3_from_float(below) == code);
    CHECK(fp8_e4m3_from_float(above) == code + 1);
    CHECK(fp8_e4m3_from_float(static_cast<float>(mid)) == ((code & 1) ? code + 1 : code));
    CHECK(fp8_e4m3_from_float(static_cast<float>(-mid)) == (0x80 | ((code & 1) ? code + 1 : code)));
  }
  CHECK(fp8_e4m3_from_float(449.0f) == 0x7E);
  CHECK(fp8_e4m3_from_float(1e30f) == 0x7E);
  CHECK(fp8_e4m3_from_float(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(fp8_e4m3_from_float(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(fp8_e4m3_from_float(std::ldexp(1.0f, -11)) == 0x00);  // below half the smallest subnormal
  CHECK(fp8_e4m3_from_float(std::numeric_limits<float>::denorm_min()) == 0x00);
  CHECK(fp8_e4m3_from_float(-std::numeric_limits<float>::quiet_NaN()) == 0x7F);
}

}  // namespace cbatch::test
