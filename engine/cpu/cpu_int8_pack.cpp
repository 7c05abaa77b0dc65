// The int8 panels' packing (format: cpu_int8_format.hpp): a blocked panel (cpu_matmul_blocks.hpp) rewritten
// as int8 groups, its scales kept exactly (as fp16 or E8M0 bytes where the values allow, checked) and its
// codes as biased bytes, nibbles or planes in the kernels' quad order; and the format's sizes and choices
// per type (group bytes, planes, activation block). Packing is deterministic: padding bytes are zeros.
#include <algorithm>
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/cpu/cpu_int8_format.hpp"
#include "engine/cpu/cpu_matmul_int8.hpp"

namespace cbatch::matmul_detail {
namespace {

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


}  // namespace

int q8_block(DType dtype) {
  return with_block_format(dtype, [](auto format) { return Int8Layout<decltype(format)>::kSuper ? kSuperK : kGroupK; });
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

}  // namespace cbatch::matmul_detail
