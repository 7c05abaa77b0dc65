// Q4_Z and Q8_Z, the internal block types of asymmetric integer codes (quant_blocks.hpp, int_codes.hpp):
// every element decodes to the bits of d * (q - z) over the classes of fp16 d (zero, subnormal, normal,
// the largest, negative), z and q; an asymmetric checkpoint's codes take them (and decode to exactly its
// dequantized weights); the CPU's int8 product of a Q4_Z matrix is the bits of the Q5_0 one that held the
// same codes before, in 5 bits a weight instead of 5.5 or 8.5; the blocked fp32 product is matmul_ref's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_pack.hpp"
#include "engine/model/int_codes.hpp"
#include "engine/model/quant_blocks.hpp"
#include "test_blocks.hpp"

namespace cbatch {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// fp16 scales of every class: +-0, the least and greatest subnormals, the least normal, 1, an inexact
// decimal, the greatest finite, and negatives.
constexpr uint16_t kScaleBits[] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x8001, 0x0400, 0x3C00,
                                   0xBC00, 0x2E66, 0x7BFF, 0xFBFF, 0x83FF};

// One block of `dtype` (Q4_Z or Q8_Z) with fp16 scale bits d, zero point z and stored codes q[32].
std::vector<uint8_t> zero_point_block(DType dtype, uint16_t d, int z, const int* q) {
  std::vector<uint8_t> b(static_cast<size_t>(dtype_block_bytes(dtype)), 0);
  b[0] = static_cast<uint8_t>(d & 0xFF);
  b[1] = static_cast<uint8_t>(d >> 8);
  if (dtype == DType::kQ4_Z) {
    b[2] = static_cast<uint8_t>(z);
    for (int e = 0; e < 16; ++e) b[4 + e] = static_cast<uint8_t>(q[e] | q[e + 16] << 4);
  } else {
    b[2] = static_cast<uint8_t>(z - 128);
    for (int e = 0; e < 32; ++e) b[4 + e] = static_cast<uint8_t>(q[e] - 128);
  }
  return b;
}

// Asymmetric codes as a checkpoint's: stored codes q in [0, 2^bits - 1], zero points in [z_lo, z_hi] per
// (output, group), codes q - z; fp16 scales; act-order: a permutation's groups.
IntCodes asymmetric_codes(int64_t out, int64_t in, int64_t group_rows, int bits, int z_lo, int z_hi, bool act_order,
                          unsigned seed) {
  std::mt19937 rng(seed);
  IntCodes c;
  c.out = out, c.in = in, c.num_groups = in / group_rows;
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::uniform_int_distribution<int> zero(z_lo, z_hi), code(0, (1 << bits) - 1);
  for (int64_t i = 0; i < out * c.num_groups; ++i) {
    c.scales.push_back(half_to_float(float_to_half(scale(rng))));
    c.zeros.push_back(static_cast<int16_t>(zero(rng)));
  }
  std::vector<int32_t> perm(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) perm[static_cast<size_t>(k)] = static_cast<int32_t>(k);
  if (act_order) std::shuffle(perm.begin(), perm.end(), rng);
  c.groups.resize(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) {
    c.groups[static_cast<size_t>(perm[static_cast<size_t>(k)])] = static_cast<int32_t>(k / group_rows);
  }
  c.codes.resize(static_cast<size_t>(out * in));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < in; ++k) {
      const int z = c.zeros[static_cast<size_t>(o * c.num_groups + c.groups[static_cast<size_t>(k)])];
      c.codes[static_cast<size_t>(o * in + k)] = static_cast<int16_t>(code(rng) - z);
    }
  }
  return c;
}

template <class F>
void check_every_code(DType dtype, const std::vector<int>& zeros) {
  constexpr int kCodes = F::kCodeBits == 4 ? 16 : 256;
  int offset_sign_differs = 0;
  for (const uint16_t d_bits : kScaleBits) {
    const float d = half_to_float(d_bits);
    for (const int z : zeros) {
      for (int first = 0; first < kCodes; first += 32) {  // every code q, 32 a block
        int q[32];
        for (int e = 0; e < 32; ++e) q[e] = (first + e) % kCodes;
        const std::vector<uint8_t> block = zero_point_block(dtype, d_bits, z, q);
        float decoded[32];
        dequantize_blocks(dtype, block.data(), 1, decoded);
        for (int e = 0; e < 32; ++e) {
          CAPTURE(d_bits);
          CAPTURE(z);
          CAPTURE(q[e]);
          const float got = block_element<F>(block.data(), e);
          const float want = d * static_cast<float>(q[e] - z);  // the checkpoint's scale * code
          CHECK(same_bits(got, want));
          CHECK(same_bits(decoded[e], want));
          CHECK(static_cast<double>(got) == static_cast<double>(d) * (q[e] - z));  // exact: no rounding at all
          // The fp32 offset m = -d * z is exact too and gives the same value; only the sign of a zero differs.
          const float alternative =
              product_rounded(d, static_cast<float>(q[e])) - product_rounded(d, static_cast<float>(z));
          CHECK(alternative == want);
          offset_sign_differs += !same_bits(alternative, want);
        }
      }
    }
  }
  MESSAGE(dtype_name(dtype) << ": d * q + m has the sign of d * (q - z)'s zero wrong in " << offset_sign_differs
                            << " cases (a zero or negative d)");
}

TEST_CASE("Q4_Z and Q8_Z decode every code to the bits of d * (q - z): subnormal, zero, large and negative d") {
  CHECK(dtype_block_bytes(DType::kQ4_Z) == 20);
  CHECK(dtype_block_bytes(DType::kQ8_Z) == 36);
  CHECK(dtype_name(DType::kQ4_Z) == "q4_z");
  CHECK(dtype_name(DType::kQ8_Z) == "q8_z");
  check_every_code<BlockFormat<DType::kQ4_Z>>(DType::kQ4_Z, {0, 1, 7, 8, 15, 16, 255});
  check_every_code<BlockFormat<DType::kQ8_Z>>(DType::kQ8_Z, {0, 1, 127, 128, 129, 255});
}

TEST_CASE("asymmetric codes take Q4_Z or Q8_Z and decode to the dequantized weights, bit for bit") {
  for (const bool act_order : {false, true}) {
    CAPTURE(act_order);
    // 4 bits, zeros 1..16 (GPTQ v1's stored zeros plus one): codes in [-16, 14], Q5_0's before.
    const IntCodes four = asymmetric_codes(24, 128, 32, 4, 1, 16, act_order, 3);
    // 8 bits: codes in [-255, 255], f32 before.
    const IntCodes eight = asymmetric_codes(24, 128, 32, 8, 0, 255, act_order, 4);
    for (const auto* c : {&four, &eight}) {
      const DType want_type = c == &four ? DType::kQ4_Z : DType::kQ8_Z;
      const auto type_name = dtype_name(want_type);
      CAPTURE(type_name);
      CHECK(int_codes_block_type(*c) == want_type);
      const OwnedTensor t = int_codes_tensor("w", *c);
      CHECK(t.view.dtype == want_type);
      CHECK((t.view.input_order != nullptr) == act_order);
      std::vector<float> got(static_cast<size_t>(c->out * c->in));
      tensor_rows_to_f32(t.view, 0, c->out, got.data());
      const std::vector<float> want = int_codes_dequantize(*c);
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
  }
  // What the types cannot hold falls back as before.
  IntCodes no_zeros = asymmetric_codes(4, 64, 32, 4, 1, 16, false, 5);
  no_zeros.zeros.clear();
  CHECK(int_codes_block_type(no_zeros) == DType::kQ5_0);
  IntCodes big_zero = asymmetric_codes(4, 64, 32, 8, 0, 255, false, 6);
  big_zero.zeros[1] = 256;  // codes q - 256 for q in [32, 63]: no block type holds them
  for (int64_t k = 32; k < 64; ++k) big_zero.codes[static_cast<size_t>(k)] = static_cast<int16_t>(k % 256 - 256);
  CHECK(int_codes_block_type(big_zero) == DType::kF32);
  IntCodes negative = asymmetric_codes(4, 64, 32, 4, 0, 0, false, 7);  // zero 0, a stored code of -16
  negative.codes[5] = -16;
  CHECK(int_codes_block_type(negative) == DType::kQ5_0);
  IntCodes fits_q4_0 = asymmetric_codes(4, 64, 32, 4, 8, 8, false, 8);  // zeros 8: Q4_0's codes, 4.5 bits
  CHECK(int_codes_block_type(fits_q4_0) == DType::kQ4_0);
}

TEST_CASE("a Q4_Z matrix's int8 product is the bits of the Q5_0 one of the same codes, in 5 bits a weight") {
  ThreadPool pool(2);
  const int64_t out = 72, in = 256;  // 5 panels of 16 lanes (9 of 8), the last partial
  for (const bool act_order : {false, true}) {
    CAPTURE(act_order);
    IntCodes c = asymmetric_codes(out, in, 64, 4, 1, 16, act_order, 11);
    const OwnedTensor z = int_codes_tensor("z", c);
    c.zeros.clear();
    const OwnedTensor q5 = int_codes_tensor("q5", c);
    REQUIRE(z.view.dtype == DType::kQ4_Z);
    REQUIRE(q5.view.dtype == DType::kQ5_0);
    const PackedMatrix zp = pack_stacked({&z.view}, pool, {true, true, false});
    const PackedMatrix bytes = pack_stacked({&q5.view}, pool, {true, true, false});
    const PackedMatrix planes = pack_stacked({&q5.view}, pool, {true, true, true});
    REQUIRE(zp.is_int8());
    REQUIRE(planes.has_planes());
    const double weights = static_cast<double>((out + matmul_panel_width() - 1) / matmul_panel_width() *
                                               matmul_panel_width() * in);
    const double order_bits = act_order ? 32.0 * static_cast<double>(in) : 0.0;  // an int32 an input
    auto bits_a_weight = [&](const PackedMatrix& p) {
      return (static_cast<double>(p.bytes()) * 8 - order_bits) / weights;
    };
    CHECK(bits_a_weight(zp) == 5.0);  // Q4_1's size: fp16 d and z, nibbles
    CHECK(bits_a_weight(bytes) == 8.5);
    CHECK(bits_a_weight(planes) == 5.5);
    for (int64_t m : {1, 2, 7}) {  // the one-row kernel and the tiles
      CAPTURE(m);
      const std::vector<float> x = testing::random_activations(static_cast<size_t>(m * in), static_cast<unsigned>(m));
      std::vector<float> y(static_cast<size_t>(m * out), NAN), y5(y.size(), NAN), yp(y.size(), NAN);
      matmul(x.data(), zp, y.data(), m, pool);
      matmul(x.data(), bytes, y5.data(), m, pool);
      matmul(x.data(), planes, yp.data(), m, pool);
      CHECK(std::memcmp(y.data(), y5.data(), y.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(y.data(), yp.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("Q4_Z and Q8_Z matrices: the blocked product is matmul_ref's bits; the int8 one batch-invariant and "
          "within 2% of the float64 product") {
  ThreadPool pool(2);
  const int64_t out = 40, in = 320, max_m = 9;
  for (const int bits : {4, 8}) {
    CAPTURE(bits);
    const IntCodes c = asymmetric_codes(out, in, 32, bits, 0, bits == 4 ? 16 : 255, false, 21);
    const OwnedTensor t = int_codes_tensor("w", c);
    REQUIRE(t.view.dtype == (bits == 4 ? DType::kQ4_Z : DType::kQ8_Z));
    const std::vector<float> w = int_codes_dequantize(c);
    const std::vector<float> x = testing::random_activations(static_cast<size_t>(max_m * in), 13);
    const PackedMatrix blocked = pack_stacked({&t.view}, pool, {true, false, false});
    REQUIRE(blocked.is_blocked());
    for (int64_t m : {int64_t{1}, int64_t{3}, max_m}) {
      std::vector<float> want(static_cast<size_t>(m * out)), got(want.size(), NAN);
      matmul_ref(x.data(), w.data(), want.data(), m, out, in);
      matmul(x.data(), blocked, got.data(), m, pool);
      CHECK(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)) == 0);
    }
    const PackedMatrix fast = pack_stacked({&t.view}, pool, {true, true, false});
    REQUIRE(fast.is_int8());
    std::vector<float> y(static_cast<size_t>(max_m * out), NAN), alone(y.size(), NAN);
    matmul(x.data(), fast, y.data(), max_m, pool);
    for (int64_t i = 0; i < max_m; ++i) {
      matmul(&x[static_cast<size_t>(i * in)], fast, &alone[static_cast<size_t>(i * out)], 1, pool);
    }
    CHECK(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)) == 0);
    const testing::ProductError e = testing::product_error(x, w, y, max_m, out, in);
    MESSAGE(bits << "-bit zero points: int8 vs the float64 product, relative error " << e.relative());
    CHECK(e.relative() < 0.02);
    CHECK(e.err > 0.0);  // the 8-bit path ran
  }
}

}  // namespace
}  // namespace cbatch
