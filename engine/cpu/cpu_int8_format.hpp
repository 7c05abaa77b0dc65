// Internal to the int8 matmul: the int8 panel format (layout and arithmetic: cpu_matmul_int8.hpp) as
// compile-time traits of a block format F (Int8Layout), the accessors of a panel's codes and scales, and
// with_int8_format, which picks F (and its planes variant) from a DType at run time. The packing
// (cpu_int8_pack.cpp) and each instruction set's kernels (cpu_int8_scalar.cpp, cpu_int8_avx2.cpp,
// cpu_int8_avx512.cpp) read the format through this header only.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/cpu/cpu_matmul_int8.hpp"

// The vector kernels' loops over a sub-block's quads, unrolled whole: the planes' high-bit shifts then
// take constant counts (as a loop, with its counts in registers, the Q6_K planes tile ran about 20% slower).
#define CBATCH_UNROLL_QUADS _Pragma("GCC unroll 8")

namespace cbatch::matmul_detail {

constexpr int kQuads = kGroupK / 4;       // 4-k steps per group
constexpr int kQuadBytes = 4 * kLanes;    // one quad of a group: kLanes x 4 bytes

template <class F>
constexpr bool has_linear_nibbles() {
  if (F::kCodeBits != 4) return false;
  for (int c = 0; c < 16; ++c)
    if (F::value(c) != F::value(0) + c) return false;
  return true;
}

// A 5- or 6-bit type whose int8 panels hold their codes in planes (Int8Layout): Planes<BlockFormat<D>>
// is D's format (every member inherited) with the planes layout; BlockFormat<D> itself keeps whole bytes.
template <class F>
struct Planes : F {};
template <class F>
struct BaseFormat {
  using type = F;
};
template <class F>
struct BaseFormat<Planes<F>> {
  using type = F;
};
template <class F, DType D>
constexpr bool is_format = std::is_same_v<typename BaseFormat<F>::type, BlockFormat<D>>;
template <class F>
constexpr bool is_planes = !std::is_same_v<typename BaseFormat<F>::type, F>;

// The types whose scales (and offsets) are fp16 numbers as stored (the 32-element blocks with an fp16 d
// and m; Q4_Z's and Q8_Z's zero points, integers of at most 8 bits): their int8 groups keep them as fp16,
// exactly, in half the bytes (a Q4_1 group: 320 bytes, not 384).
template <class F>
constexpr bool has_half_scales() {
  return is_format<F, DType::kQ8_0> || is_format<F, DType::kQ4_0> || is_format<F, DType::kQ4_1> ||
         is_format<F, DType::kQ5_0> || is_format<F, DType::kQ5_1> || is_format<F, DType::kIQ4_NL> ||
         is_format<F, DType::kQ4_Z> || is_format<F, DType::kQ8_Z>;
}

// The types whose int8 groups come in superblocks of their 256-k blocks (cpu_matmul_int8.hpp): Q4_K, Q5_K,
// Q6_K.
template <class F>
constexpr bool has_super_scales() {
  return is_format<F, DType::kQ4_K> || is_format<F, DType::kQ5_K> || is_format<F, DType::kQ6_K>;
}

// The high bits above a nibble of the 5- and 6-bit types (Q5_0, Q5_1, Q5_K: 1; Q6_K: 2), and their least
// value; 0 for the rest.
template <class F>
constexpr int wide_code_high_bits() {
  if constexpr (is_format<F, DType::kQ5_0> || is_format<F, DType::kQ5_1> || is_format<F, DType::kQ5_K>) return 1;
  return is_format<F, DType::kQ6_K> ? 2 : 0;
}
template <class F>
constexpr int wide_code_min() {
  if constexpr (is_format<F, DType::kQ5_0>) return -16;
  return is_format<F, DType::kQ6_K> ? -32 : 0;
}

// The least value of a 4-bit type's 16 codes.
template <class F>
constexpr int least_value() {
  int least = F::value(0);
  for (int c = 1; c < 16; ++c) least = std::min(least, F::value(c));
  return least;
}

// Calls fn(format) with D's format, or with Planes of it when `planes` and D is a 5- or 6-bit type.
template <class Fn>
decltype(auto) with_int8_format(DType dtype, bool planes, Fn&& fn) {
  return with_block_format(dtype, [&](auto format) {
    using F = decltype(format);
    if constexpr (wide_code_high_bits<F>() > 0) {
      if (planes) return fn(Planes<F>{});
    }
    return fn(format);
  });
}

// The int8 group of format F: the blocked group's scale arrays (as fp16 where has_half_scales), then the
// codes; or (has_super_scales) superblocks of kSuperGroups groups: a header, then the groups' codes
// (cpu_matmul_int8.hpp).
template <class F>
struct Int8Layout {
  using G = GroupLayout<F>;
  static constexpr bool kNibbles = has_linear_nibbles<F>();
  // The 4-bit types whose values are not linear in the code (IQ4_NL, IQ4_XS, MXFP4): the nibble plane holds
  // their codes, and the kernels map each code to its u through a 16-byte table (one byte shuffle), so
  // they stream 4 bits a weight, not 8.
  static constexpr bool kTableNibbles = F::kCodeBits == 4 && !kNibbles;
  static constexpr int kHighBits = is_planes<F> ? wide_code_high_bits<F>() : 0;
  // codes as a nibble plane (+ high bits)
  static constexpr bool kNibblePlane = kNibbles || kTableNibbles || kHighBits > 0;
  static constexpr int kQuadsPerHighByte = kHighBits > 0 ? 8 / kHighBits : 1;
  // value = u + kBias
  static constexpr int kBias = kNibbles         ? F::value(0)
                               : kTableNibbles  ? least_value<F>()
                               : kHighBits > 0  ? wide_code_min<F>()
                                                : -128;
  static constexpr int kQuadsPerSub = kQuads / G::kSubs;
  // Q4_Z, Q8_Z: the offset array holds each lane's integer zero point z (value = u + kBias - z), which the
  // kernels fold into the lane's integer sum, (kBias - z) * sum(q): the same exact sum as a block type
  // that stores q - z (Q5_0, Q8_0), so the same bits. kOffset: the rest of the offsets, an fp32 step.
  static constexpr bool kZeroPoints = F::kFormula == Formula::kScaledZero;
  static constexpr bool kOffset = G::kHasOffset && !kZeroPoints;
  static constexpr bool kHalfScales = has_half_scales<F>();
  // MXFP4's scales are powers of two: its int8 groups keep their E8M0 bytes (a quarter of fp32's).
  static constexpr bool kByteScales = is_format<F, DType::kMXFP4>;
  static constexpr bool kSuper = has_super_scales<F>();
  static constexpr int kSuperGroups = kSuper ? F::kElems / kGroupK : 1;
  static constexpr int kSuperSubs = kSuperGroups * G::kSubs;  // sub-blocks of a superblock
  static constexpr int kHeaderHalves = G::kHasOffset ? 2 : 1;
  // Q6_K's sub-scales are int8; Q4_K's sc and m unsigned 6-bit codes.
  static constexpr bool kSignedSubScales = is_format<F, DType::kQ6_K>;
  // A superblock's header: d[kLanes] (, -dmin[kLanes]) as fp16, then sc[kSuperSubs][kLanes]
  // (, m[kSuperSubs / 4][kLanes][4]: lane l's four m of sub-blocks 4i..4i + 3 side by side, a quad for
  // vpdpbusd) as bytes, padded to a whole quad (Q6_K: 288 + 32 bytes) so that every quad's codes start on
  // a vector (and cache line) boundary: split loads measured 5% slower in the tile.
  static constexpr size_t kHeaderBytes =
      kSuper ? (static_cast<size_t>(kHeaderHalves * (2 * kLanes + kSuperSubs * kLanes)) + kQuadBytes - 1) /
                   kQuadBytes * kQuadBytes
             : 0;
  static constexpr size_t kScaleBytes =
      kSuper ? 0 : static_cast<size_t>(G::kSubs * G::kSubFloats) * (kByteScales ? 1 : kHalfScales ? 2 : 4);
  static constexpr size_t kCodeBytes =
      static_cast<size_t>((kNibblePlane ? kQuads / 2 + kHighBits : kQuads) * kQuadBytes);
  static constexpr size_t kSuperBytes = kHeaderBytes + kSuperGroups * (kScaleBytes + kCodeBytes);
  static constexpr size_t kBytes = kSuperBytes / kSuperGroups;  // per group, on average
  static_assert(kSuperBytes % kSuperGroups == 0);
  static_assert(!kSuper || (F::kElems == kSuperK && (!G::kHasOffset || kSuperSubs == 8)));  // m: two quads
};

// A table-nibble type's u of each code (Int8Layout::kTableNibbles), 16 bytes for a byte shuffle.
template <class F>
struct NibbleTable {
  alignas(16) static constexpr std::array<uint8_t, 16> kU = [] {
    std::array<uint8_t, 16> u{};
    for (int c = 0; c < 16; ++c) u[c] = static_cast<uint8_t>(F::value(c) - Int8Layout<F>::kBias);
    return u;
  }();
};

// The codes of int8 group b of a panel.
template <class F, class Byte>
Byte* int8_codes(Byte* panel, int64_t b) {
  using L = Int8Layout<F>;
  if constexpr (L::kSuper) {
    return panel + (b / L::kSuperGroups) * L::kSuperBytes + L::kHeaderBytes + (b % L::kSuperGroups) * L::kCodeBytes;
  }
  return panel + b * L::kBytes + L::kScaleBytes;
}

// Where scale array entry i of int8 group b (see int8_scale) lives in its superblock's header: the fp16
// d (an offset: -dmin) of its lane, and the byte of its sub-block's sc (an offset: m).
template <class F, class Byte>
Byte* super_half(Byte* panel, int64_t b, int i) {
  using L = Int8Layout<F>;
  const int r = i % GroupLayout<F>::kSubFloats;
  return panel + (b / L::kSuperGroups) * L::kSuperBytes + (r >= kLanes ? 2 * kLanes : 0) + 2 * (r % kLanes);
}
template <class F, class Byte>
Byte* super_byte(Byte* panel, int64_t b, int i) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int r = i % G::kSubFloats;
  const int j = static_cast<int>(b % L::kSuperGroups) * G::kSubs + i / G::kSubFloats;  // sub-block of the superblock
  Byte* sc = panel + (b / L::kSuperGroups) * L::kSuperBytes + L::kHeaderHalves * 2 * kLanes;
  if (r < kLanes) return sc + j * kLanes + r;
  return sc + L::kSuperSubs * kLanes + (j / 4) * kQuadBytes + (r - kLanes) * 4 + j % 4;
}

// Scale array entry i of int8 group b (s[l] of sub-block j: i = j * kSubFloats + l; its offset b[l]:
// i + kLanes). A superblock's d * sc and -dmin * m are exact fp32 products: the blocked group's values.
template <class F>
float int8_scale(const uint8_t* panel, int64_t b, int i) {
  using L = Int8Layout<F>;
  if constexpr (L::kSuper) {
    const uint8_t code = *super_byte<F>(panel, b, i);
    return load_half(super_half<F>(panel, b, i)) *
           static_cast<float>(L::kSignedSubScales ? static_cast<int>(static_cast<int8_t>(code)) : code);
  }
  const uint8_t* group = panel + b * L::kBytes;
  if constexpr (L::kHalfScales) return load_half(group + 2 * i);
  if constexpr (L::kByteScales) return e8m0_half(group[i]);
  float v;
  std::memcpy(&v, group + 4 * i, sizeof(v));
  return v;
}

// Lane l's zero point in int8 group b (a zero-point type: Int8Layout::kZeroPoints), exact as an int.
template <class F>
int32_t int8_zero(const uint8_t* panel, int64_t b, int l) {
  return static_cast<int32_t>(int8_scale<F>(panel, b, kLanes + l));
}

// Sum of q over sub-block `sub` of group b (sums per 16 k).
template <class F>
int32_t sub_sum(const int32_t* sums, int64_t b, int sub) {
  if constexpr (GroupLayout<F>::kSubs == 1) return sums[2 * b] + sums[2 * b + 1];
  return sums[2 * b + sub];
}

// Where the m quads of group b's superblock start.
template <class F>
const uint8_t* super_m_quads(const uint8_t* panel, int64_t b) {
  return super_byte<F>(panel, b - b % Int8Layout<F>::kSuperGroups, kLanes);
}

}  // namespace cbatch::matmul_detail
