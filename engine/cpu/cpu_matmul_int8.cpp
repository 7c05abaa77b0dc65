// The 8-bit integer path of the CPU matmul (layout and arithmetic: cpu_matmul_int8.hpp): activation
// quantization, int8 panels made from blocked ones, and three kernels of the same arithmetic: a scalar
// reference, AVX2 (16-bit multiply-adds) and AVX-512 VNNI (vpdpbusd). The vector kernels are compiled for
// their instruction sets with target attributes and chosen at run time, so one binary runs on either CPU.
#include "engine/cpu/cpu_matmul_int8.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "engine/base/error.hpp"

#if defined(__x86_64__)
#include <cpuid.h>  // __get_cpuid, bit_F16C
#endif

// GCC 12's false positive on the AVX-512 conversions' and reductions' undefined pass-through operand
// (cpu_matmul_blocks.hpp), reported where the kernels are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace cbatch::matmul_detail {
namespace {

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
// and m): their int8 groups keep them as fp16, exactly, in half the bytes (a Q4_1 group: 320 bytes, not 384).
template <class F>
constexpr bool has_half_scales() {
  return is_format<F, DType::kQ8_0> || is_format<F, DType::kQ4_0> || is_format<F, DType::kQ4_1> ||
         is_format<F, DType::kQ5_0> || is_format<F, DType::kQ5_1> || is_format<F, DType::kIQ4_NL>;
}

// The types whose int8 groups come in superblocks of their 256-k blocks (see the header): Q4_K, Q5_K, Q6_K.
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

// The E8M0 byte whose e8m0_half is `scale` (0, a lane past the matrix's rows: byte 0, whose codes are 0).
inline uint8_t e8m0_of(float scale) {
  uint32_t bits;
  std::memcpy(&bits, &scale, sizeof(bits));
  const uint32_t e = bits >= 0x00800000u ? (bits >> 23) + 1 : bits == 0x00400000u ? 1 : 0;
  if (e > 255 || (scale != 0.0f && e8m0_half(static_cast<uint8_t>(e)) != scale)) {
    throw Error("internal error: an MXFP4 scale that is not an E8M0 power of two");
  }
  return static_cast<uint8_t>(e);
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
// codes; or (has_super_scales) superblocks of kSuperGroups groups: a header, then the groups' codes (see
// the header).
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

// An fp32 number that is an fp16 value (a scale read by load_half) as its fp16 bits; anything else is an
// internal error (the int8 group would not hold it exactly).
uint16_t exact_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const int exponent = static_cast<int>((u >> 23) & 0xFF);
  const uint32_t mantissa = u & 0x7FFFFF;
  uint16_t h = sign;
  if (exponent == 0xFF) {
    h = static_cast<uint16_t>(sign | 0x7C00 | mantissa >> 13);
  } else if (exponent - 112 >= 1) {  // a normal fp16 (an exponent past its range fails the check below)
    h = static_cast<uint16_t>(sign | std::min(exponent - 112, 31) << 10 | mantissa >> 13);
  } else if (exponent - 112 > -11) {  // a subnormal fp16: m * 2^-24
    h = static_cast<uint16_t>(sign | (mantissa | 0x800000) >> (126 - exponent));
  }
  const uint8_t bytes[2] = {static_cast<uint8_t>(h & 0xFF), static_cast<uint8_t>(h >> 8)};
  const float back = load_half(bytes);
  if (std::memcmp(&back, &f, sizeof(f)) != 0) throw Error("internal error: a scale that is not an fp16 value");
  return h;
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

// Lane l's header entries of superblock `super` from its GGUF block (zeros past the last row): Q4_K's d,
// -dmin and 6-bit sc, m; Q6_K's d and int8 sub-scales.
template <class F>
void pack_super_lane(const uint8_t* block, int64_t super, int l, uint8_t* panel) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int64_t first = super * L::kSuperGroups;
  uint8_t* d = super_half<F>(panel, first, l);
  if constexpr (L::kSignedSubScales) {  // Q6_K: ql[128], qh[64], scales[16], d
    d[0] = block ? block[208] : 0;
    d[1] = block ? block[209] : 0;
    for (int j = 0; j < L::kSuperSubs; ++j) {
      *super_byte<F>(panel, first + j / G::kSubs, (j % G::kSubs) * G::kSubFloats + l) = block ? block[192 + j] : 0;
    }
  } else {  // Q4_K: d, dmin, 12 bytes of 6-bit sc and m
    uint8_t* neg_dmin = super_half<F>(panel, first, kLanes + l);
    d[0] = block ? block[0] : 0;
    d[1] = block ? block[1] : 0;
    neg_dmin[0] = block ? block[2] : 0;
    neg_dmin[1] = block ? static_cast<uint8_t>(block[3] ^ 0x80) : 0;
    for (int g = 0; g < L::kSuperGroups; ++g) {
      int sc = 0, m = 0;
      if (block) kquant_scale_min(block + 4, g, sc, m);
      *super_byte<F>(panel, first + g, l) = static_cast<uint8_t>(sc);
      *super_byte<F>(panel, first + g, kLanes + l) = static_cast<uint8_t>(m);
    }
  }
}

// A superblock's header from the lanes' GGUF blocks, checked against the blocked groups' scales: each
// entry's product must be the same fp32.
template <class F>
void pack_super_header(const uint8_t* const (&rows)[kLanes], const uint8_t* blocked, int64_t super, uint8_t* panel) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int64_t first = super * L::kSuperGroups;
  std::memset(panel + super * L::kSuperBytes, 0, L::kHeaderBytes);  // its padding too: packing is deterministic
  for (int l = 0; l < kLanes; ++l) {
    const uint8_t* block = rows[l] ? rows[l] + super * F::kBytes : nullptr;
    pack_super_lane<F>(block, super, l, panel);
    if (!block) continue;
    for (int g = 0; g < L::kSuperGroups; ++g) {
      for (int sub = 0; sub < G::kSubs; ++sub) {
        for (int i = sub * G::kSubFloats + l; i < (sub + 1) * G::kSubFloats; i += kLanes) {
          float want;
          std::memcpy(&want, blocked + (first + g) * G::kBytes + 4 * i, sizeof(want));
          const float got = int8_scale<F>(static_cast<const uint8_t*>(panel), first + g, i);
          if (std::memcmp(&want, &got, sizeof(got)) != 0) {
            throw Error("internal error: an int8 superblock scale differs from its blocked group's");
          }
        }
      }
    }
  }
}

template <class F>
void pack_panel(const uint8_t* const (&rows)[kLanes], const uint8_t* blocked, int64_t k, uint8_t* out) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* src = blocked + b * G::kBytes;
    uint8_t* dst = int8_codes<F>(out, b) - L::kScaleBytes;
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups == 0) pack_super_header<F>(rows, blocked, b / L::kSuperGroups, out);
    } else if constexpr (L::kByteScales) {
      for (int i = 0; i < G::kSubs * G::kSubFloats; ++i) {
        float scale;
        std::memcpy(&scale, src + 4 * i, sizeof(scale));
        dst[i] = e8m0_of(scale);
      }
    } else if constexpr (L::kHalfScales) {
      for (int i = 0; i < G::kSubs * G::kSubFloats; ++i) {
        float scale;
        std::memcpy(&scale, src + 4 * i, sizeof(scale));
        const uint16_t h = exact_half(scale);
        dst[2 * i] = static_cast<uint8_t>(h & 0xFF);
        dst[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
    } else {
      std::memcpy(dst, src, G::kScaleBytes);
    }
    const uint8_t* codes = src + G::kScaleBytes;
    uint8_t* u = dst + L::kScaleBytes;
    // The group's u (value less the bias; a table-nibble type's code), k-major as the blocked codes, checked
    // once: loops the compiler vectorizes, then the quads' transpose.
    int16_t values[kGroupK * kLanes];
    if constexpr (G::kNibbles) {  // the blocked codes' nibbles: lane l < kHalf low, l + kHalf high
      for (int i = 0; i < kGroupK; ++i) {
        for (int l = 0; l < kHalf; ++l) {
          const uint8_t pair = codes[i * kHalf + l];
          if constexpr (L::kTableNibbles) {  // the code itself
            values[i * kLanes + l] = static_cast<int16_t>(pair & 0x0F);
            values[i * kLanes + kHalf + l] = static_cast<int16_t>(pair >> 4);
            continue;
          }
          values[i * kLanes + l] = static_cast<int16_t>(F::value(pair & 0x0F) - L::kBias);
          values[i * kLanes + kHalf + l] = static_cast<int16_t>(F::value(pair >> 4) - L::kBias);
        }
      }
    } else {
      for (int e = 0; e < kGroupK * kLanes; ++e) {
        values[e] = static_cast<int16_t>(static_cast<int8_t>(codes[e]) - L::kBias);
      }
    }
    int lowest = 0, highest = 0;
    for (const int16_t v : values) {
      lowest = std::min<int>(lowest, v);
      highest = std::max<int>(highest, v);
    }
    if (lowest < 0 || highest >= (L::kNibblePlane ? 16 << L::kHighBits : 256)) {
      throw Error("internal error: a code outside its int8 group's range");
    }
    // u of lane position p = l * 4 + j of quad t: values[(4 t + j) kLanes + l], a byte, or its nibble (the
    // low one in even quads) with its high bits in the high plane, kQuadsPerHighByte quads a byte.
    if constexpr (!L::kNibblePlane) {
      for (int t = 0; t < kQuads; ++t)
        for (int l = 0; l < kLanes; ++l)
          for (int j = 0; j < 4; ++j)
            u[t * kQuadBytes + l * 4 + j] = static_cast<uint8_t>(values[(4 * t + j) * kLanes + l]);
    } else {
      for (int t = 0; t < kQuads; t += 2)
        for (int l = 0; l < kLanes; ++l)
          for (int j = 0; j < 4; ++j) {
            const int even = values[(4 * t + j) * kLanes + l], odd = values[(4 * t + 4 + j) * kLanes + l];
            u[(t / 2) * kQuadBytes + l * 4 + j] = static_cast<uint8_t>((even & 0x0F) | (odd & 0x0F) << 4);
          }
      if constexpr (L::kHighBits > 0) {
        constexpr int kPer = L::kQuadsPerHighByte;
        for (int h = 0; h < kQuads / kPer; ++h)
          for (int l = 0; l < kLanes; ++l)
            for (int j = 0; j < 4; ++j) {
              int high = 0;
              for (int q = 0; q < kPer; ++q)
                high |= (values[(4 * (h * kPer + q) + j) * kLanes + l] >> 4) << (L::kHighBits * q);
              u[(kQuads / 2 + h) * kQuadBytes + l * 4 + j] = static_cast<uint8_t>(high);
            }
      }
    }
  }
}

// u of lane position p (l * 4 + j) of quad t of an int8 group's codes (see Int8Layout): a byte, or a
// nibble (the low one in even quads) with the high plane's bits above it.
template <class F>
int panel_code(const uint8_t* codes, int t, int p) {
  using L = Int8Layout<F>;
  if constexpr (!L::kNibblePlane) return codes[t * kQuadBytes + p];
  const uint8_t pair = codes[(t / 2) * kQuadBytes + p];
  int u = (pair >> (4 * (t % 2))) & 0x0F;
  if constexpr (L::kTableNibbles) return NibbleTable<F>::kU[u];
  if constexpr (L::kHighBits > 0) {
    const int per = L::kQuadsPerHighByte;
    const uint8_t high = codes[(kQuads / 2 + t / per) * kQuadBytes + p];
    u |= ((high >> (L::kHighBits * (t % per))) & ((1 << L::kHighBits) - 1)) << 4;
  }
  return u;
}

// Sum of q over sub-block `sub` of group b (sums per 16 k).
template <class F>
int32_t sub_sum(const int32_t* sums, int64_t b, int sub) {
  if constexpr (GroupLayout<F>::kSubs == 1) return sums[2 * b] + sums[2 * b + 1];
  return sums[2 * b + sub];
}

// A superblock type's integer sub-scale (sc) of lane l, sub-block `sub` of group b; its m.
template <class F>
int super_sc(const uint8_t* panel, int64_t b, int sub, int l) {
  const uint8_t code = *super_byte<F>(panel, b, sub * GroupLayout<F>::kSubFloats + l);
  return Int8Layout<F>::kSignedSubScales ? static_cast<int8_t>(code) : code;
}
template <class F>
int super_m(const uint8_t* panel, int64_t b, int sub, int l) {
  return *super_byte<F>(panel, b, sub * GroupLayout<F>::kSubFloats + kLanes + l);
}

// The activation block x must have been quantized with for format F's panels.
template <class F>
void check_q8_block(const Q8Rows& x) {
  if (x.block != (Int8Layout<F>::kSuper ? kSuperK : kGroupK)) {
    throw Error("internal error: activations quantized per " + std::to_string(x.block) + " k for these int8 panels");
  }
}

// One row, one panel, lane by lane: the reference the vector kernels match bit for bit.
template <class F>
void panel_row_scalar(const Q8Rows& x, int64_t row, const uint8_t* panel, float* y, int64_t cols) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int64_t k = x.cols;
  const int8_t* q = x.q.data() + row * k;
  const float* d = x.d.data() + row * (k / x.block);
  const int32_t* sums = x.sums.data() + row * (k / 16);
  float acc[kLanes] = {};
  int32_t tot[kLanes] = {}, mins[kLanes] = {};  // a superblock's integer sums
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* codes = int8_codes<F>(panel, b);
    for (int sub = 0; sub < G::kSubs; ++sub) {
      const int s = sub * G::kSubFloats;  // the sub-block's scales in the group's array
      const int32_t sum_q = sub_sum<F>(sums, b, sub);
      for (int l = 0; l < kLanes; ++l) {
        int32_t isum = L::kBias * sum_q;
        for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; ++t) {
          for (int j = 0; j < 4; ++j) isum += panel_code<F>(codes, t, l * 4 + j) * q[b * kGroupK + 4 * t + j];
        }
        if constexpr (L::kSuper) {
          tot[l] += super_sc<F>(panel, b, sub, l) * isum;
          if constexpr (G::kHasOffset) mins[l] += super_m<F>(panel, b, sub, l) * sum_q;
          continue;
        }
        acc[l] = std::fma(int8_scale<F>(panel, b, s + l) * d[b], static_cast<float>(isum), acc[l]);
        if constexpr (G::kHasOffset) {
          acc[l] = std::fma(int8_scale<F>(panel, b, s + kLanes + l), d[b] * static_cast<float>(sum_q), acc[l]);
        }
      }
    }
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups != L::kSuperGroups - 1) continue;
      const float dx = d[b / L::kSuperGroups];
      for (int l = 0; l < kLanes; ++l) {
        float sum = load_half(super_half<F>(panel, b, l)) * static_cast<float>(tot[l]);
        if constexpr (G::kHasOffset) {
          sum = std::fma(load_half(super_half<F>(panel, b, kLanes + l)), static_cast<float>(mins[l]), sum);
        }
        acc[l] = std::fma(sum, dx, acc[l]);
        tot[l] = mins[l] = 0;
      }
    }
  }
  std::memcpy(y, acc, static_cast<size_t>(std::min<int64_t>(cols, kLanes)) * sizeof(float));
}

#if defined(__x86_64__)
#define CBATCH_INT8_X86 1

// The vector kernels' loops over a sub-block's quads, unrolled whole: the planes' high-bit shifts then
// take constant counts (as a loop, with its counts in registers, the Q6_K planes tile ran about 20% slower).
#define CBATCH_UNROLL_QUADS _Pragma("GCC unroll 8")

int32_t load_quad(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, sizeof(v));
  return v;
}

// Scale array entries i..i + 7 of int8 group b (int8_scale's values; not a superblock type's).
template <class F>
__attribute__((target("avx2,fma,f16c"))) __m256 int8_scales8(const uint8_t* panel, int64_t b, int i) {
  using L = Int8Layout<F>;
  const uint8_t* group = panel + b * L::kBytes;
  if constexpr (L::kHalfScales) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 2 * i)));
  }
  if constexpr (L::kByteScales) {  // e8m0_half: (e - 1) << 23, or the subnormals 2^-128, 2^-127 for e < 2
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(group + i)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
  }
  return _mm256_loadu_ps(reinterpret_cast<const float*>(group) + i);
}

// Scale array entries i..i + 15 of int8 group b (not a superblock type's).
template <class F>
__attribute__((target("avx512f"))) __m512 int8_scales16(const uint8_t* panel, int64_t b, int i) {
  using L = Int8Layout<F>;
  const uint8_t* group = panel + b * L::kBytes;
  if constexpr (L::kHalfScales) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 2 * i)));
  }
  if constexpr (L::kByteScales) {  // as int8_scales8
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + i)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 is_normal = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_normal, subnormal, normal));
  }
  return _mm512_loadu_ps(reinterpret_cast<const float*>(group) + i);
}

// A superblock type's header, read by the vector kernels: lanes i..i + 7 (16: all) of the integer
// sub-scales of sub-block `sub` of group b, of the fp16 d (h = i) or -dmin (h = kLanes + i) as fp32, and
// the sum over the superblock's sub-blocks of m * sum(q) (sums: the row's sums per 16 k of the superblock;
// split: its split_sums).
template <class F>
__attribute__((target("avx2"))) __m256i super_sc8(const uint8_t* panel, int64_t b, int sub, int i) {
  const uint8_t* sc = super_byte<F>(panel, b, sub * GroupLayout<F>::kSubFloats + i);
  const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc));
  return Int8Layout<F>::kSignedSubScales ? _mm256_cvtepi8_epi32(c) : _mm256_cvtepu8_epi32(c);
}
template <class F>
__attribute__((target("avx512f"))) __m512i super_sc16(const uint8_t* panel, int64_t b, int sub) {
  const uint8_t* sc = super_byte<F>(panel, b, sub * GroupLayout<F>::kSubFloats);
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc));
  return Int8Layout<F>::kSignedSubScales ? _mm512_cvtepi8_epi32(c) : _mm512_cvtepu8_epi32(c);
}
template <class F>
__attribute__((target("avx2,f16c"))) __m256 super_half8(const uint8_t* panel, int64_t b, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(super_half<F>(panel, b, h))));
}
template <class F>
__attribute__((target("avx512f"))) __m512 super_half16(const uint8_t* panel, int64_t b, int h) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(super_half<F>(panel, b, h))));
}
// Where the m quads of group b's superblock start.
template <class F>
const uint8_t* super_m_quads(const uint8_t* panel, int64_t b) {
  return super_byte<F>(panel, b - b % Int8Layout<F>::kSuperGroups, kLanes);
}
template <class F>
__attribute__((target("avx2"))) __m256i super_mins8(const uint8_t* panel, int64_t b, int i, const int32_t* sums) {
  const uint8_t* m = super_m_quads<F>(panel, b);
  __m256i mins = _mm256_setzero_si256();
  for (int quad = 0; quad < Int8Layout<F>::kSuperSubs / 4; ++quad) {
    const __m256i m4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + quad * kQuadBytes + 4 * i));
    for (int j = 0; j < 4; ++j) {
      const int sub = 4 * quad + j;
      const __m256i mj = _mm256_and_si256(_mm256_srli_epi32(m4, 8 * j), _mm256_set1_epi32(0xFF));
      mins = _mm256_add_epi32(mins, _mm256_mullo_epi32(mj, _mm256_set1_epi32(sums[2 * sub] + sums[2 * sub + 1])));
    }
  }
  return mins;
}
// m's two quads (m0, m1) times the split sums: 128 * (m . h) + m . l, exactly sum(m * s).
__attribute__((target("avx512f,avx512vnni"))) __m512i super_mins16(__m512i m0, __m512i m1, const int32_t* split) {
  __m512i piece[2];
  for (int i = 0; i < 2; ++i) {
    piece[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), m0, _mm512_set1_epi32(split[2 * i])), m1,
                                   _mm512_set1_epi32(split[2 * i + 1]));
  }
  return _mm512_add_epi32(_mm512_slli_epi32(piece[0], 7), piece[1]);
}

// A high-bit plane moved so that quad i of its bytes (i * kBits up) sits at bit 4, where its u's high bits
// go. The 16-bit shifts move no wanted bit across a byte: the caller keeps only those bits.
template <int kBits>
__attribute__((target("avx2"))) __m256i high_at_bit4(__m256i high, int i) {
  const int shift = 4 - kBits * i;
  if (shift == 0) return high;
  return shift > 0 ? _mm256_sll_epi16(high, _mm_cvtsi32_si128(shift))
                   : _mm256_srl_epi16(high, _mm_cvtsi32_si128(-shift));
}
template <int kBits>
__attribute__((target("avx512f,avx512bw"))) __m512i high_at_bit4(__m512i high, int i) {
  const int shift = 4 - kBits * i;
  if (shift == 0) return high;
  return shift > 0 ? _mm512_sll_epi16(high, _mm_cvtsi32_si128(shift))
                   : _mm512_srl_epi16(high, _mm_cvtsi32_si128(-shift));
}

// Quad t of an int8 group's codes, 8 lanes from lane 8c (panel_code's u, a vector at a time).
template <class F>
__attribute__((target("avx2"))) __m256i quad8(const uint8_t* codes, int t, int c) {
  using L = Int8Layout<F>;
  if constexpr (!L::kNibblePlane) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + t * kQuadBytes + c * 32));
  }
  const __m256i pair = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (t / 2) * kQuadBytes + c * 32));
  const __m256i low = _mm256_and_si256(t % 2 == 0 ? pair : _mm256_srli_epi16(pair, 4), _mm256_set1_epi8(0x0F));
  if constexpr (L::kTableNibbles) {
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(NibbleTable<F>::kU.data()));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), low);
  }
  if constexpr (L::kHighBits == 0) return low;
  const int per = L::kQuadsPerHighByte;
  const __m256i high =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (kQuads / 2 + t / per) * kQuadBytes + c * 32));
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(((1 << L::kHighBits) - 1) << 4));
  return _mm256_or_si256(low, _mm256_and_si256(high_at_bit4<L::kHighBits>(high, t % per), mask));
}

// Quads t and t + 1 (t even) of an int8 group's codes, all 16 lanes: a nibble load serves both, and a
// wide type's high bits join with one ternary-logic step each.
template <class F>
__attribute__((target("avx512f,avx512bw"))) void quad_pair16(const uint8_t* codes, int t, __m512i& u0, __m512i& u1) {
  using L = Int8Layout<F>;
  if constexpr (!L::kNibblePlane) {
    u0 = _mm512_loadu_si512(codes + t * kQuadBytes);
    u1 = _mm512_loadu_si512(codes + (t + 1) * kQuadBytes);
    return;
  }
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i pair = _mm512_loadu_si512(codes + (t / 2) * kQuadBytes);
  if constexpr (L::kHighBits == 0) {
    u0 = _mm512_and_si512(pair, low4);
    u1 = _mm512_and_si512(_mm512_srli_epi16(pair, 4), low4);
    if constexpr (L::kTableNibbles) {
      const __m512i table = _mm512_broadcast_i32x4(
          _mm_load_si128(reinterpret_cast<const __m128i*>(NibbleTable<F>::kU.data())));
      u0 = _mm512_shuffle_epi8(table, u0);
      u1 = _mm512_shuffle_epi8(table, u1);
    }
    return;
  }
  const int per = L::kQuadsPerHighByte;
  const __m512i high = _mm512_loadu_si512(codes + (kQuads / 2 + t / per) * kQuadBytes);
  const __m512i mask = _mm512_set1_epi8(static_cast<char>(((1 << L::kHighBits) - 1) << 4));
  const __m512i high0 = _mm512_and_si512(high_at_bit4<L::kHighBits>(high, t % per), mask);
  const __m512i high1 = _mm512_and_si512(high_at_bit4<L::kHighBits>(high, (t + 1) % per), mask);
  constexpr int kLowOrHigh = 0xEC;  // (a & c) | b
  u0 = _mm512_ternarylogic_epi32(pair, high0, low4, kLowOrHigh);
  u1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(pair, 4), high1, low4, kLowOrHigh);
}

// One row, one panel, 8 lanes at a time: u widened to 16 bits, _mm256_madd_epi16 sums pairs of k exactly,
// a horizontal add finishes each lane's quad.
template <class F>
__attribute__((target("avx2,fma,f16c"))) void panel_row_avx2(const Q8Rows& x, int64_t row, const uint8_t* panel, float* y,
                                                         int64_t cols) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  constexpr int kChunks = kLanes / 8;
  const int64_t k = x.cols;
  const int8_t* q = x.q.data() + row * k;
  const float* d = x.d.data() + row * (k / x.block);
  const int32_t* sums = x.sums.data() + row * (k / 16);
  __m256 acc[kChunks];
  __m256i tot[kChunks];  // a superblock's integer sums
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (auto& t : tot) t = _mm256_setzero_si256();
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* codes = int8_codes<F>(panel, b);
    for (int sub = 0; sub < G::kSubs; ++sub) {
      const int s = sub * G::kSubFloats;
      const int32_t sum_q = sub_sum<F>(sums, b, sub);
      for (int c = 0; c < kChunks; ++c) {
        __m256i pairs0 = _mm256_setzero_si256(), pairs1 = _mm256_setzero_si256();
        CBATCH_UNROLL_QUADS
        for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; ++t) {
          const __m256i u = quad8<F>(codes, t, c);
          const int8_t* qt = q + b * kGroupK + 4 * t;
          const __m256i qv = _mm256_setr_epi16(qt[0], qt[1], qt[2], qt[3], qt[0], qt[1], qt[2], qt[3], qt[0], qt[1],
                                               qt[2], qt[3], qt[0], qt[1], qt[2], qt[3]);
          pairs0 = _mm256_add_epi32(pairs0, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(u)), qv));
          pairs1 = _mm256_add_epi32(pairs1, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(u, 1)), qv));
        }
        // hadd leaves lanes 0 1 4 5 | 2 3 6 7; the permute puts them in order.
        __m256i isum = _mm256_permute4x64_epi64(_mm256_hadd_epi32(pairs0, pairs1), 0xD8);
        isum = _mm256_add_epi32(isum, _mm256_set1_epi32(L::kBias * sum_q));
        if constexpr (L::kSuper) {
          tot[c] = _mm256_add_epi32(tot[c], _mm256_mullo_epi32(isum, super_sc8<F>(panel, b, sub, c * 8)));
          continue;
        }
        const __m256 scale = _mm256_mul_ps(int8_scales8<F>(panel, b, s + c * 8), _mm256_set1_ps(d[b]));
        acc[c] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[c]);
        if constexpr (G::kHasOffset) {
          acc[c] = _mm256_fmadd_ps(int8_scales8<F>(panel, b, s + kLanes + c * 8), _mm256_set1_ps(d[b] * static_cast<float>(sum_q)),
                                   acc[c]);
        }
      }
    }
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups != L::kSuperGroups - 1) continue;
      const __m256 dx = _mm256_set1_ps(d[b / L::kSuperGroups]);
      for (int c = 0; c < kChunks; ++c) {
        __m256 sum = _mm256_mul_ps(super_half8<F>(panel, b, c * 8), _mm256_cvtepi32_ps(tot[c]));
        if constexpr (G::kHasOffset) {
          const int64_t first = b - (L::kSuperGroups - 1);  // the superblock's first group
          const __m256i mins = super_mins8<F>(panel, b, c * 8, sums + first * 2);
          sum = _mm256_fmadd_ps(super_half8<F>(panel, b, kLanes + c * 8), _mm256_cvtepi32_ps(mins), sum);
        }
        acc[c] = _mm256_fmadd_ps(sum, dx, acc[c]);
        tot[c] = _mm256_setzero_si256();
      }
    }
  }
  float out[kLanes];
  for (int c = 0; c < kChunks; ++c) _mm256_storeu_ps(out + c * 8, acc[c]);
  std::memcpy(y, out, static_cast<size_t>(std::min<int64_t>(cols, kLanes)) * sizeof(float));
}

// MR rows x NV panels of 16 lanes: each quad of weights is loaded once and multiplied into every row
// with vpdpbusd (u8 weights x s8 activations, 4 k summed into each int32 lane); MR x NV independent
// accumulator chains hide its latency (integer sums: their order changes no bit). A superblock type's
// sub-block sums are scaled by their sc in int32 (vpmulld) and go to fp32 once per superblock.
template <class F, int MR, int NV>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_vnni(const Q8Rows& x, int64_t row,
                                                                     const uint8_t* panels, size_t panel_bytes,
                                                                     float* y, int64_t ldy, int64_t cols) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int64_t k = x.cols;
  __m512 acc[MR][NV];
  __m512i tot[MR][NV];  // a superblock type's integer sums over the superblock
  for (auto& row_acc : acc)
    for (auto& a : row_acc) a = _mm512_setzero_ps();
  for (auto& row_tot : tot)
    for (auto& t : row_tot) t = _mm512_setzero_si512();
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* group_codes[NV];
    for (int v = 0; v < NV; ++v) group_codes[v] = int8_codes<F>(panels + v * panel_bytes, b);
    for (int sub = 0; sub < G::kSubs; ++sub) {
      __m512i isum[MR][NV];
      for (auto& row_sum : isum)
        for (auto& v : row_sum) v = _mm512_setzero_si512();
      // Two quads a step: a nibble load serves both, and each activation quad is broadcast from memory
      // into the vpdpbusd that uses it, leaving the registers to the integer and fp32 sums.
      CBATCH_UNROLL_QUADS
      for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; t += 2) {
        for (int v = 0; v < NV; ++v) {
          __m512i u0, u1;
          quad_pair16<F>(group_codes[v], t, u0, u1);
          for (int r = 0; r < MR; ++r) {
            const int8_t* qt = x.q.data() + (row + r) * k + b * kGroupK + 4 * t;
            isum[r][v] = _mm512_dpbusd_epi32(isum[r][v], u0, _mm512_set1_epi32(load_quad(qt)));
            isum[r][v] = _mm512_dpbusd_epi32(isum[r][v], u1, _mm512_set1_epi32(load_quad(qt + 4)));
          }
        }
      }
      if constexpr (L::kSuper) {
        __m512i sc[NV];
        for (int v = 0; v < NV; ++v) sc[v] = super_sc16<F>(panels + v * panel_bytes, b, sub);
        for (int r = 0; r < MR; ++r) {
          const __m512i bias = _mm512_set1_epi32(L::kBias * sub_sum<F>(x.sums.data() + (row + r) * (k / 16), b, sub));
          for (int v = 0; v < NV; ++v) {
            const __m512i biased = L::kBias == 0 ? isum[r][v] : _mm512_add_epi32(isum[r][v], bias);
            tot[r][v] = _mm512_add_epi32(tot[r][v], _mm512_mullo_epi32(biased, sc[v]));
          }
        }
        continue;
      }
      const int s = sub * G::kSubFloats;
      __m512 scale[NV], offset[NV];
      for (int v = 0; v < NV; ++v) {
        scale[v] = int8_scales16<F>(panels + v * panel_bytes, b, s);
        if constexpr (G::kHasOffset) offset[v] = int8_scales16<F>(panels + v * panel_bytes, b, s + kLanes);
      }
      for (int r = 0; r < MR; ++r) {
        const int32_t sum_q = sub_sum<F>(x.sums.data() + (row + r) * (k / 16), b, sub);
        const float dr = x.d[static_cast<size_t>((row + r) * (k / kGroupK) + b)];
        const __m512i bias = _mm512_set1_epi32(L::kBias * sum_q);
        for (int v = 0; v < NV; ++v) {
          const __m512 isum_f = _mm512_cvtepi32_ps(_mm512_add_epi32(isum[r][v], bias));
          acc[r][v] = _mm512_fmadd_ps(_mm512_mul_ps(scale[v], _mm512_set1_ps(dr)), isum_f, acc[r][v]);
          if constexpr (G::kHasOffset) {
            acc[r][v] = _mm512_fmadd_ps(offset[v], _mm512_set1_ps(dr * static_cast<float>(sum_q)), acc[r][v]);
          }
        }
      }
    }
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups != L::kSuperGroups - 1) continue;
      const int64_t supers = k / kSuperK, sb = b / L::kSuperGroups;
      __m512 dv[NV], neg_dmin[NV];
      __m512i m0[NV], m1[NV];
      for (int v = 0; v < NV; ++v) {
        const uint8_t* panel = panels + v * panel_bytes;
        dv[v] = super_half16<F>(panel, b, 0);
        if constexpr (G::kHasOffset) {
          neg_dmin[v] = super_half16<F>(panel, b, kLanes);
          m0[v] = _mm512_loadu_si512(super_m_quads<F>(panel, b));
          m1[v] = _mm512_loadu_si512(super_m_quads<F>(panel, b) + kQuadBytes);
        }
      }
      for (int r = 0; r < MR; ++r) {
        const __m512 dx = _mm512_set1_ps(x.d[static_cast<size_t>((row + r) * supers + sb)]);
        const int32_t* split = &x.split_sums[static_cast<size_t>(((row + r) * supers + sb) * 4)];
        for (int v = 0; v < NV; ++v) {
          __m512 sum = _mm512_mul_ps(dv[v], _mm512_cvtepi32_ps(tot[r][v]));
          if constexpr (G::kHasOffset) {
            sum = _mm512_fmadd_ps(neg_dmin[v], _mm512_cvtepi32_ps(super_mins16(m0[v], m1[v], split)), sum);
          }
          acc[r][v] = _mm512_fmadd_ps(sum, dx, acc[r][v]);
          tot[r][v] = _mm512_setzero_si512();
        }
      }
    }
  }
  for (int v = 0; v < NV; ++v) {
    const int64_t valid = std::min<int64_t>(16, cols - v * 16);
    if (valid <= 0) break;
    const __mmask16 mask = valid == 16 ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1);
    for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(y + r * ldy + v * 16, mask, acc[r][v]);
  }
}

// One row, one panel: a decode step's product. tile_vnni's arithmetic, but panel by panel, so that each
// thread reads one sequential stream (several panels side by side are several streams some KB apart,
// which measured 1.4x slower from memory), with each group's quads split between two integer
// accumulators (even and odd quads; the sum is exact either way) to halve the vpdpbusd chain, and a
// nibble load serving both quads it holds.
template <class F>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void row_vnni(const Q8Rows& x, int64_t row,
                                                                    const uint8_t* panel, float* y, int64_t cols) {
  using L = Int8Layout<F>;
  using G = GroupLayout<F>;
  const int64_t k = x.cols;
  const int8_t* q = x.q.data() + row * k;
  const float* d = x.d.data() + row * (k / x.block);
  const int32_t* sums = x.sums.data() + row * (k / 16);
  __m512 acc = _mm512_setzero_ps();
  __m512i tot = _mm512_setzero_si512();  // a superblock's integer sum
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    const uint8_t* codes = int8_codes<F>(panel, b);
    const int8_t* qb = q + b * kGroupK;
    for (int sub = 0; sub < G::kSubs; ++sub) {
      __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
      CBATCH_UNROLL_QUADS
      for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; t += 2) {
        __m512i u0, u1;
        quad_pair16<F>(codes, t, u0, u1);
        even = _mm512_dpbusd_epi32(even, u0, _mm512_set1_epi32(load_quad(qb + 4 * t)));
        odd = _mm512_dpbusd_epi32(odd, u1, _mm512_set1_epi32(load_quad(qb + 4 * t + 4)));
      }
      const int32_t sum_q = sub_sum<F>(sums, b, sub);
      const __m512i isum = _mm512_add_epi32(_mm512_add_epi32(even, odd), _mm512_set1_epi32(L::kBias * sum_q));
      if constexpr (L::kSuper) {
        tot = _mm512_add_epi32(tot, _mm512_mullo_epi32(isum, super_sc16<F>(panel, b, sub)));
        continue;
      }
      const int s = sub * G::kSubFloats;
      acc = _mm512_fmadd_ps(_mm512_mul_ps(int8_scales16<F>(panel, b, s), _mm512_set1_ps(d[b])), _mm512_cvtepi32_ps(isum),
                            acc);
      if constexpr (G::kHasOffset) {
        acc = _mm512_fmadd_ps(int8_scales16<F>(panel, b, s + kLanes), _mm512_set1_ps(d[b] * static_cast<float>(sum_q)),
                              acc);
      }
    }
    if constexpr (L::kSuper) {
      if (b % L::kSuperGroups != L::kSuperGroups - 1) continue;
      const int64_t sb = b / L::kSuperGroups;
      const __m512 dx = _mm512_set1_ps(d[sb]);
      __m512 sum = _mm512_mul_ps(super_half16<F>(panel, b, 0), _mm512_cvtepi32_ps(tot));
      if constexpr (G::kHasOffset) {
        const uint8_t* m = super_m_quads<F>(panel, b);
        const __m512i mins = super_mins16(_mm512_loadu_si512(m), _mm512_loadu_si512(m + kQuadBytes),
                                          &x.split_sums[static_cast<size_t>((row * (k / kSuperK) + sb) * 4)]);
        sum = _mm512_fmadd_ps(super_half16<F>(panel, b, kLanes), _mm512_cvtepi32_ps(mins), sum);
      }
      acc = _mm512_fmadd_ps(sum, dx, acc);
      tot = _mm512_setzero_si512();
    }
  }
  const int64_t valid = std::min<int64_t>(16, cols);
  _mm512_mask_storeu_ps(y, valid == 16 ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1), acc);
}

constexpr int kVnniRows = 4;    // a VNNI tile: up to 4 rows x 3 panels, 24 accumulators of 32 registers
constexpr int kVnniPanels = kInt8TilePanels;

using VnniTileFn = void (*)(const Q8Rows&, int64_t, const uint8_t*, size_t, float*, int64_t, int64_t);

template <class F, int MR, int... NVs>
constexpr std::array<VnniTileFn, kVnniPanels> vnni_tile_row(std::integer_sequence<int, NVs...>) {
  return {&tile_vnni<F, MR, NVs + 1>...};
}

// vnni_tiles<F>[mr - 1][nv - 1]: an mr-row, nv-panel tile.
template <class F, int... MRs>
constexpr std::array<std::array<VnniTileFn, kVnniPanels>, kVnniRows> vnni_tile_table(std::integer_sequence<int, MRs...>) {
  return {vnni_tile_row<F, MRs + 1>(std::make_integer_sequence<int, kVnniPanels>{})...};
}
template <class F>
constexpr auto vnni_tiles = vnni_tile_table<F>(std::make_integer_sequence<int, kVnniRows>{});

// quantize_block's arithmetic on n floats (a multiple of 16): the same products, roundings and clamps, so
// the same bytes.
__attribute__((target("avx512f,avx512bw"))) void quantize_block_avx512(const float* xb, int n, float d, int8_t* q,
                                                                       int32_t* sums) {
  const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int i = 0; i < n; i += 16) {
    const __m512 r =
        _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + i), id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i v = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(v));
    sums[i / 16] = _mm512_reduce_add_epi32(v);
  }
}
__attribute__((target("avx512f"))) float abs_max_avx512(const float* x, int n) {
  __m512 amax = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  return _mm512_reduce_max_ps(amax);
}
#endif  // __x86_64__

// n k of an activation row in steps of d: q = round(x / d) (ties to even) within +-127, sums of q per 16.
void quantize_block(const float* xb, int n, float d, int8_t* q, int32_t* sums) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; i += 16) {
    int32_t sum = 0;
    for (int j = i; j < i + 16; ++j) {
      const auto v = static_cast<int8_t>(std::clamp(std::nearbyint(xb[j] * id), -127.0f, 127.0f));
      q[j] = v;
      sum += v;
    }
    sums[i / 16] = sum;
  }
}

float abs_max(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// A 256-block's sums of q per 32 k, split as Q8Rows::split_sums says.
void split_block_sums(const int32_t* sums, int32_t* split) {
  uint8_t bytes[16];
  for (int j = 0; j < 8; ++j) {
    const int32_t s = sums[2 * j] + sums[2 * j + 1];
    bytes[j] = static_cast<uint8_t>(s >> 7);  // in [-32, 31]
    bytes[8 + j] = static_cast<uint8_t>(s & 127);
  }
  std::memcpy(split, bytes, sizeof(bytes));
}

template <class F>
void run_panels(Int8Isa isa, const Q8Rows& x, int64_t row_begin, int64_t row_end, const uint8_t* panels,
                size_t panel_bytes, int64_t panel_begin, int64_t panel_end, float* y, int64_t ldy, int64_t n) {
  check_q8_block<F>(x);
#if defined(CBATCH_INT8_X86)
  if (isa == Int8Isa::kAvx512Vnni && kLanes == 16 && row_end - row_begin == 1) {
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      row_vnni<F>(x, row_begin, panels + p * panel_bytes, y + row_begin * ldy + p * kLanes, n - p * kLanes);
    }
    return;
  }
  if (isa == Int8Isa::kAvx512Vnni && kLanes == 16) {
    for (int64_t p = panel_begin; p < panel_end; p += kVnniPanels) {
      const int nv = static_cast<int>(std::min<int64_t>(kVnniPanels, panel_end - p));
      for (int64_t r = row_begin; r < row_end; r += kVnniRows) {
        const int mr = static_cast<int>(std::min<int64_t>(kVnniRows, row_end - r));
        vnni_tiles<F>[mr - 1][nv - 1](x, r, panels + p * panel_bytes, panel_bytes, y + r * ldy + p * kLanes, ldy,
                                      n - p * kLanes);
      }
    }
    return;
  }
#endif
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = panels + p * panel_bytes;
    const int64_t cols = n - p * kLanes;
    float* yp = y + p * kLanes;
#if defined(CBATCH_INT8_X86)
    if (isa != Int8Isa::kScalar) {
      for (int64_t r = row_begin; r < row_end; ++r) panel_row_avx2<F>(x, r, panel, yp + r * ldy, cols);
      continue;
    }
#endif
    for (int64_t r = row_begin; r < row_end; ++r) panel_row_scalar<F>(x, r, panel, yp + r * ldy, cols);
  }
}

#if defined(CBATCH_INT8_X86)
// F16C (the fp16 scales' conversions) from CPUID leaf 1: clang's __builtin_cpu_supports has no "f16c".
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

Int8Isa detect_isa() {
#if defined(CBATCH_INT8_X86)
  __builtin_cpu_init();
  if (kLanes == 16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni")) {
    return Int8Isa::kAvx512Vnni;
  }
  const Int8Isa isa = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()
                          ? Int8Isa::kAvx2
                          : Int8Isa::kScalar;
  std::fprintf(stderr, "[cbatch] %s: 8-bit products run on %s\n",
               kLanes == 16 ? "this CPU has no AVX-512 VNNI" : "built without AVX-512 (8-lane panels)",
               int8_isa_name(isa));
  return isa;
#else
  return Int8Isa::kScalar;
#endif
}

}  // namespace

void quantize_rows_q8(const float* x, int64_t m, int64_t k, int block, Q8Rows& out) {
  if (block != kGroupK && block != kSuperK) throw Error("internal error: activation blocks are of 32 or 256");
  out.rows = m;
  out.cols = k;
  out.block = block;
  const auto need = static_cast<size_t>(m * k);
  if (out.q.size() < need) out.q.resize(need);
  if (out.d.size() < need / block) out.d.resize(need / block);
  if (out.sums.size() < need / 16) out.sums.resize(need / 16);
  if (block == kSuperK && out.split_sums.size() < need / kSuperK * 4) out.split_sums.resize(need / kSuperK * 4);
  auto* quantize = &quantize_block;
  auto* amax = &abs_max;
#if defined(CBATCH_INT8_X86)
  if (int8_isa() == Int8Isa::kAvx512Vnni) {
    quantize = &quantize_block_avx512;
    amax = &abs_max_avx512;
  }
#endif
  for (int64_t b = 0; b < m * (k / block); ++b) {
    out.d[static_cast<size_t>(b)] = amax(x + b * block, block) / 127.0f;
    int32_t* sums = out.sums.data() + b * (block / 16);
    quantize(x + b * block, block, out.d[static_cast<size_t>(b)], out.q.data() + b * block, sums);
    if (block == kSuperK) split_block_sums(sums, out.split_sums.data() + 4 * b);
  }
}

int q8_block(DType dtype) {
  return with_block_format(dtype, [](auto format) { return Int8Layout<decltype(format)>::kSuper ? kSuperK : kGroupK; });
}

bool can_run(Int8Isa isa) {
#if defined(CBATCH_INT8_X86)
  __builtin_cpu_init();
  if (isa == Int8Isa::kAvx512Vnni) {
    return kLanes == 16 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }
  if (isa == Int8Isa::kAvx2) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  }
#endif
  return isa == Int8Isa::kScalar;
}

Int8Isa int8_isa() {
  static const Int8Isa isa = detect_isa();
  return isa;
}

const char* int8_isa_name(Int8Isa isa) {
  switch (isa) {
    case Int8Isa::kAvx512Vnni: return "AVX-512 VNNI";
    case Int8Isa::kAvx2: return "AVX2";
    case Int8Isa::kScalar: break;
  }
  return "scalar code";
}

bool has_int8_planes(DType dtype) {
  return with_block_format(dtype, [](auto format) { return wide_code_high_bits<decltype(format)>() > 0; });
}

size_t int8_group_bytes(DType dtype, bool planes) {
  return with_int8_format(dtype, planes, [](auto format) { return Int8Layout<decltype(format)>::kBytes; });
}

void pack_int8_panel(DType dtype, bool planes, const uint8_t* const (&rows)[kLanes], const uint8_t* blocked,
                     int64_t k, uint8_t* out) {
  with_int8_format(dtype, planes, [&](auto format) { pack_panel<decltype(format)>(rows, blocked, k, out); });
}

void matmul_int8_panels(Int8Isa isa, DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                        const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                        float* y, int64_t ldy, int64_t n) {
  with_int8_format(dtype, planes, [&](auto format) {
    run_panels<decltype(format)>(isa, x, row_begin, row_end, panels, panel_bytes, panel_begin, panel_end, y, ldy, n);
  });
}

}  // namespace cbatch::matmul_detail
