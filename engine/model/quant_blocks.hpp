// The GGUF block types element by element: how a block's bytes give an element's integer code, the code's
// value, its sub-block's scale and offset, and the fp32 weight. The one source of every decoder:
// tensor_rows_to_f32, the CPU matmul's blocked panels and the CUDA backend's load-time kernel, so all of
// them give the same bits. The types added after Q8_0/Q4_0/Q4_1 give exactly the `gguf` Python package's
// float32 values: a product is rounded before its offset is added, never fused (product_rounded), whatever
// the compiler's contraction setting. (With stored data the product, an f16 scale times a sub-block scale
// of at most 8 bits times a code of at most 8, is exact anyway, so only the addition rounds.) Block layouts
// (bytes, in order) are ggml's; an HF checkpoint's MXFP4 pairs become ggml's blocks at load (mxfp4_hf.hpp).
// Host and device code: no CUDA include.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/base/error.hpp"
#include "engine/base/host_device.hpp"
#include "engine/model/dtype.hpp"

namespace cbatch {

// The fp32 whose bit pattern is `bits`.
CBATCH_HOST_DEVICE inline float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
#endif
}

// The exact value of IEEE half bits (NaN payloads kept, as numpy keeps them).
CBATCH_HOST_DEVICE inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
#if defined(__CUDA_ARCH__)
    bits = __float_as_uint(magnitude);
#else
    std::memcpy(&bits, &magnitude, 4);
#endif
  } else {
    bits = (exponent == 31 ? 0x7F800000u : (exponent + 112) << 23) | mantissa << 13;
  }
  bits |= sign;
  return float_from_bits(bits);
}

CBATCH_HOST_DEVICE inline float load_half(const uint8_t* p) {
  return half_to_float(static_cast<uint16_t>(p[0] | p[1] << 8));
}

// a * b rounded to fp32 on its own: never fused into a following add, whatever the compiler's setting
// (GCC contracts across statements; the empty asm hides the product from it).
CBATCH_HOST_DEVICE inline float product_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  float p = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#else
  volatile float opaque = p;
  p = opaque;
#endif
  return p;
#endif
}

// How a code's value v becomes the weight, with the sub-block's scale s and offset b.
enum class Formula {
  kScaled,          // s * v
  kScaledOffset,    // s * v rounded, + b (the gguf package's order)
  kFusedOffset,     // fma(v, s, b): Q4_1, as the CPU matmul has always decoded it
  kScaledZero,      // s * (v - b), b an integer zero point: Q4_Z, Q8_Z (v - b is exact, and so is the
                    // product: an fp16 s times an integer of at most 9 bits), so the bits of s * code
};

// A sub-block's scale and offset. The offset of the K-quants is the negated product dmin * min, itself
// rounded on its own (exact with stored data, but then the compiler may not fuse it into the final add
// either).
struct ScaleOffset {
  float scale = 0.0f;
  float offset = 0.0f;  // unused by kScaled; kScaledZero's zero point
};

template <Formula kFormula>
CBATCH_HOST_DEVICE inline float weight_value(ScaleOffset so, int value) {
  const float v = static_cast<float>(value);
  if constexpr (kFormula == Formula::kScaled) {
    return so.scale * v;  // a lone product: nothing to contract it with
  } else if constexpr (kFormula == Formula::kScaledOffset) {
    return product_rounded(so.scale, v) + so.offset;
  } else if constexpr (kFormula == Formula::kScaledZero) {
    return so.scale * (v - so.offset);  // both steps exact: no rounding for a contraction to change
  } else {
#if defined(__CUDA_ARCH__)
    return fmaf(v, so.scale, so.offset);
#elif defined(__FP_FAST_FMAF)
    return std::fma(v, so.scale, so.offset);
#else
    return v * so.scale + so.offset;  // no fma instruction: nothing to contract
#endif
  }
}

// Element e (< 32) of 32 nibbles in 16 bytes: low nibbles are elements 0..15.
CBATCH_HOST_DEVICE inline int nibble32(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0x0F : qs[e - 16] >> 4; }
// Element e (< 256) of 2-bit codes in 64 bytes: byte (e / 128) * 32 + e % 32, bits 2 * ((e % 128) / 32).
CBATCH_HOST_DEVICE inline int crumb256(const uint8_t* qs, int e) {
  return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
// The fifth bit of element e (< 32) of Q5_0/Q5_1: bit e of a little-endian u32.
CBATCH_HOST_DEVICE inline int bit32(const uint8_t* qh, int e) { return (qh[e / 8] >> (e % 8)) & 1; }
// IQ4's 16 non-linear values {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113},
// one int8 per byte of two words (no table in memory, so device code reads it too).
CBATCH_HOST_DEVICE constexpr int iq4_value(int code) {
  const uint64_t word = code < 8 ? 0xF6EADDCFBFAD9881ull : 0x7159453526190D01ull;
  return static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (code & 7))));
}
// MXFP4's E2M1 codes (sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives) doubled to integers, as ggml's kvalues_mxfp4: code 8 (-0) is +0.
CBATCH_HOST_DEVICE constexpr int mxfp4_value(int code) {
  const int magnitude = (0x0C08060403020100ull >> (8 * (code & 7))) & 0xFF;
  return code < 8 ? magnitude : -magnitude;
}
// Half of the E8M0 scale 2^(e - 127), the factor of the doubled codes: 2^(e - 128), exact (e 0 and 1 give
// the fp32 subnormals 2^-128 and 2^-127; e 255, NaN in the OCP format, is 2^127 as in ggml).
CBATCH_HOST_DEVICE inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return float_from_bits(bits);
}
// Q4_K/Q5_K: the 6-bit scale and minimum of sub-block j (< 8), packed in 12 bytes; s[i] is byte i (a
// pointer, or a register copy that reads its bytes by value: moe_quant_gemm_block.cuh).
template <class Bytes>
CBATCH_HOST_DEVICE inline void kquant_scale_min(const Bytes& s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
    min = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
  }
}

// A block type's decoder: kElems elements in kBytes bytes, sub-blocks of kSubElems sharing a scale (and
// offset); code(block, e) is element e's stored code, kCodeBits wide (8: a signed byte that is its own
// value; 4: a nibble whose value is value(code)); scale(block, j) is sub-block j's. kRawCodes: where a
// block's codes lie in the CPU matmul's own order (32 int8, or 16 bytes of nibbles as nibble32), or -1.
template <DType D>
struct BlockFormat;

template <>
struct BlockFormat<DType::kQ8_0> {  // d, int8 q[32]
  static constexpr int kElems = 32, kBytes = 34, kSubElems = 32, kCodeBits = 8, kRawCodes = 2;
  static constexpr Formula kFormula = Formula::kScaled;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return static_cast<int8_t>(b[2 + e]); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) { return {load_half(b), 0.0f}; }
};

template <>
struct BlockFormat<DType::kQ4_0> {  // d, qs[16]; x = (q - 8) * d
  static constexpr int kElems = 32, kBytes = 18, kSubElems = 32, kCodeBits = 4, kRawCodes = 2;
  static constexpr Formula kFormula = Formula::kScaled;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 2, e); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c - 8; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) { return {load_half(b), 0.0f}; }
};

template <>
struct BlockFormat<DType::kQ4_1> {  // d, m, qs[16]; x = q * d + m, fused
  static constexpr int kElems = 32, kBytes = 20, kSubElems = 32, kCodeBits = 4, kRawCodes = 4;
  static constexpr Formula kFormula = Formula::kFusedOffset;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 4, e); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) { return {load_half(b), load_half(b + 2)}; }
};

template <>
struct BlockFormat<DType::kQ5_0> {  // d, qh (u32: fifth bits), qs[16]; x = d * (q - 16)
  static constexpr int kElems = 32, kBytes = 22, kSubElems = 32, kCodeBits = 8, kRawCodes = -1;
  static constexpr Formula kFormula = Formula::kScaled;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) {
    return (nibble32(b + 6, e) | bit32(b + 2, e) << 4) - 16;
  }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) { return {load_half(b), 0.0f}; }
};

template <>
struct BlockFormat<DType::kQ5_1> {  // d, m, qh, qs[16]; x = d * q + m
  static constexpr int kElems = 32, kBytes = 24, kSubElems = 32, kCodeBits = 8, kRawCodes = -1;
  static constexpr Formula kFormula = Formula::kScaledOffset;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 8, e) | bit32(b + 4, e) << 4; }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) { return {load_half(b), load_half(b + 2)}; }
};

template <>
struct BlockFormat<DType::kIQ4_NL> {  // d, qs[16] (as Q4_0); x = d * iq4_value(q)
  static constexpr int kElems = 32, kBytes = 18, kSubElems = 32, kCodeBits = 4, kRawCodes = 2;
  static constexpr Formula kFormula = Formula::kScaled;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 2, e); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return iq4_value(c); }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) { return {load_half(b), 0.0f}; }
};

template <>
struct BlockFormat<DType::kQ2_K> {  // scales[16] (4-bit scale | 4-bit min << 4), qs[64], d, dmin
  static constexpr int kElems = 256, kBytes = 84, kSubElems = 16, kCodeBits = 4, kRawCodes = -1;
  static constexpr Formula kFormula = Formula::kScaledOffset;  // d * sc * q - dmin * m
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return crumb256(b + 16, e); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int j) {
    return {load_half(b + 80) * static_cast<float>(b[j] & 0x0F),
            -product_rounded(load_half(b + 82), static_cast<float>(b[j] >> 4))};
  }
};

template <>
struct BlockFormat<DType::kQ3_K> {  // hmask[32], qs[64], scales[12] (16 x 6 bits), d
  static constexpr int kElems = 256, kBytes = 110, kSubElems = 16, kCodeBits = 4, kRawCodes = -1;
  static constexpr Formula kFormula = Formula::kScaled;  // d * (sc - 32) * (q - 4 * !high bit)
  // Code: the two low bits, and the high bit of hmask (set: no offset) above them.
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) {
    return crumb256(b + 32, e) | ((b[e % 32] >> (e / 32)) & 1) << 2;
  }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c - 4; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int j) {
    const uint8_t* sc = b + 96;
    const int low = j < 8 ? sc[j] & 0x0F : sc[j - 8] >> 4;
    const int high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return {load_half(b + 108) * static_cast<float>((low | high << 4) - 32), 0.0f};
  }
};

// Q4_K and Q5_K: d, dmin, scales[12] (8 x 6-bit scale and min), (Q5_K: qh[32],) qs[128]; x = d * sc * q - dmin * m.
template <bool kFifthBit>
struct KQuant45Format {
  static constexpr int kElems = 256, kBytes = kFifthBit ? 176 : 144, kSubElems = 32, kRawCodes = -1;
  static constexpr int kCodeBits = kFifthBit ? 8 : 4;
  static constexpr Formula kFormula = Formula::kScaledOffset;
  // Element i (< 32) of the block's 32-element row j: the layout row by row, which a loop over i vectorizes.
  CBATCH_HOST_DEVICE static int row_code(const uint8_t* b, int j, int i) {
    const int low = (b[(kFifthBit ? 48 : 16) + (j / 2) * 32 + i] >> (4 * (j % 2))) & 0x0F;
    return kFifthBit ? low | ((b[16 + i] >> j) & 1) << 4 : low;
  }
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return row_code(b, e / 32, e % 32); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int j) {
    int sc = 0, m = 0;
    kquant_scale_min(b + 4, j, sc, m);
    return {load_half(b) * static_cast<float>(sc), -product_rounded(load_half(b + 2), static_cast<float>(m))};
  }
};
template <>
struct BlockFormat<DType::kQ4_K> : KQuant45Format<false> {};
template <>
struct BlockFormat<DType::kQ5_K> : KQuant45Format<true> {};

template <>
struct BlockFormat<DType::kQ6_K> {  // ql[128], qh[64], scales[16] (int8), d; x = d * sc * (q - 32)
  static constexpr int kElems = 256, kBytes = 210, kSubElems = 16, kCodeBits = 8, kRawCodes = -1;
  static constexpr Formula kFormula = Formula::kScaled;
  // Element i (< 32) of row j (as KQuant45Format's): half j / 4, whose quarter q = j % 4 takes the low or high
  // nibbles of 32 ql bytes and bits 2q, 2q + 1 of its 32 qh bytes.
  CBATCH_HOST_DEVICE static int row_code(const uint8_t* b, int j, int i) {
    const int h = j / 4, q = j % 4;
    const int low = (b[h * 64 + (q % 2) * 32 + i] >> (4 * (q / 2))) & 0x0F;
    const int high = (b[128 + h * 32 + i] >> (2 * q)) & 3;
    return (low | high << 4) - 32;
  }
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return row_code(b, e / 32, e % 32); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int j) {
    return {load_half(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + j])), 0.0f};
  }
};

template <>
struct BlockFormat<DType::kIQ4_XS> {  // d, scales_h (u16: 8 x 2 bits), scales_l[4] (8 x 4 bits), qs[128]
  static constexpr int kElems = 256, kBytes = 136, kSubElems = 32, kCodeBits = 4, kRawCodes = -1;
  static constexpr Formula kFormula = Formula::kScaled;  // d * (sc - 32) * iq4_value(q)
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 8 + (e / 32) * 16, e % 32); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return iq4_value(c); }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int j) {
    const int low = (b[4 + j / 2] >> (4 * (j % 2))) & 0x0F;
    const int high = ((b[2 + j / 4] >> (2 * (j % 4))) & 3);
    return {load_half(b) * static_cast<float>((low | high << 4) - 32), 0.0f};
  }
};

template <>
struct BlockFormat<DType::kMXFP4> {  // e (E8M0), qs[16] (as Q4_0); x = 2^(e - 128) * mxfp4_value(q)
  static constexpr int kElems = 32, kBytes = 17, kSubElems = 32, kCodeBits = 4, kRawCodes = 1;
  static constexpr Formula kFormula = Formula::kScaled;  // a power of two times a small integer: exact
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 1, e); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return mxfp4_value(c); }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) { return {e8m0_half(b[0]), 0.0f}; }
};

// An E4M3 code's value times 2^9, an integer (the smallest subnormal is 2^-9, the largest finite value
// 448 = 229376 / 2^9): subnormal m -> m, normal (8 + m) * 2^(e - 1). The NaN codes (0x7F, 0xFF) read as
// 480; an FP8 checkpoint holding one is refused at load (fp8_hf.cpp).
CBATCH_HOST_DEVICE constexpr int e4m3_value_x512(int code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const int magnitude = e == 0 ? m : (8 + m) << (e - 1);
  return (code & 0x80) ? -magnitude : magnitude;
}

template <>
struct BlockFormat<DType::kFP8> {  // d (fp32), E4M3 q[32]; x = d * e4m3(q), as the checkpoint's dequantization
  static constexpr int kElems = 32, kBytes = 36, kSubElems = 32, kCodeBits = 8, kRawCodes = -1;
  // (d * 2^-9) * (e4m3 * 2^9): both factors exact, so the one rounding is that of d * e4m3 (-0, code 0x80,
  // decodes to +0).
  static constexpr Formula kFormula = Formula::kScaled;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return b[4 + e]; }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return e4m3_value_x512(c); }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) {
    const uint32_t bits = static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
                          static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
    return {float_from_bits(bits) * 0.001953125f, 0.0f};
  }
};

// cbatch's internal types for asymmetric integer codes (int_codes.hpp), never in a GGUF file: a code q
// stored unsigned with its block's integer zero point z, x = d * (q - z), exactly the checkpoint's
// scale * (q - z). (An fp32 offset m = -d * z would give the same value, d * q + m, for every d and q, but
// +0 where d * (q - z) is -0, a zero or negative d; the integer keeps the bits, and the int8 kernels fold
// it into their exact integer sums.)
template <>
struct BlockFormat<DType::kQ4_Z> {  // d, z (u8), a zero byte, qs[16] (as Q4_1's); x = d * (q - z)
  static constexpr int kElems = 32, kBytes = 20, kSubElems = 32, kCodeBits = 4, kRawCodes = 4;
  static constexpr Formula kFormula = Formula::kScaledZero;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 4, e); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) {
    return {load_half(b), static_cast<float>(b[2])};
  }
};

// 8-bit codes q in [0, 255] kept as the signed bytes q - 128 (as Q8_0's, so the CPU's byte panels take
// them as they are), with z - 128 as a signed byte: x = d * ((q - 128) - (z - 128)).
template <>
struct BlockFormat<DType::kQ8_Z> {  // d, z - 128 (s8), a zero byte, q - 128 (s8)[32]
  static constexpr int kElems = 32, kBytes = 36, kSubElems = 32, kCodeBits = 8, kRawCodes = 4;
  static constexpr Formula kFormula = Formula::kScaledZero;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return static_cast<int8_t>(b[4 + e]); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return c; }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int) {
    return {load_half(b), static_cast<float>(static_cast<int8_t>(b[2]))};
  }
};

// An NVFP4 checkpoint's codes (nvfp4_hf.hpp), never in a GGUF file: 32 E2M1 codes as MXFP4's doubled
// integers (mxfp4_value), each 16 with half its fp32 scale s = fp8 scale / global scale; (s / 2) * (2 * e2m1)
// is the checkpoint's s * e2m1 rounded once (code 8, -0, reads as +0).
template <>
struct BlockFormat<DType::kNVFP4> {  // s0 / 2, s1 / 2 (fp32), qs[16] (as Q4_0's); x = s_j / 2 * mxfp4_value(q)
  static constexpr int kElems = 32, kBytes = 24, kSubElems = 16, kCodeBits = 4, kRawCodes = 8;
  static constexpr Formula kFormula = Formula::kScaled;
  CBATCH_HOST_DEVICE static int code(const uint8_t* b, int e) { return nibble32(b + 8, e); }
  CBATCH_HOST_DEVICE static constexpr int value(int c) { return mxfp4_value(c); }
  CBATCH_HOST_DEVICE static ScaleOffset scale(const uint8_t* b, int j) {
    const uint8_t* s = b + 4 * j;
    return {float_from_bits(static_cast<uint32_t>(s[0]) | static_cast<uint32_t>(s[1]) << 8 |
                            static_cast<uint32_t>(s[2]) << 16 | static_cast<uint32_t>(s[3]) << 24),
            0.0f};
  }
};

// Element e of one block of format F.
template <class F>
CBATCH_HOST_DEVICE inline float block_element(const uint8_t* block, int e) {
  return weight_value<F::kFormula>(F::scale(block, e / F::kSubElems), F::value(F::code(block, e)));
}

// The whole block into out (F::kElems), each sub-block's scale decoded once.
template <class F>
CBATCH_HOST_DEVICE inline void decode_block(const uint8_t* block, float* out) {
  for (int j = 0; j < F::kElems / F::kSubElems; ++j) {
    const ScaleOffset so = F::scale(block, j);
    for (int e = j * F::kSubElems; e < (j + 1) * F::kSubElems; ++e) {
      out[e] = weight_value<F::kFormula>(so, F::value(F::code(block, e)));
    }
  }
}

constexpr bool is_block_type(DType dtype) {
  return dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16;
}

// fn(BlockFormat<D>{}) for a block type's D (host code: a launcher or a loop picks its instantiation).
template <class Fn>
decltype(auto) with_block_format(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kQ8_0: return fn(BlockFormat<DType::kQ8_0>{});
    case DType::kQ4_0: return fn(BlockFormat<DType::kQ4_0>{});
    case DType::kQ4_1: return fn(BlockFormat<DType::kQ4_1>{});
    case DType::kQ5_0: return fn(BlockFormat<DType::kQ5_0>{});
    case DType::kQ5_1: return fn(BlockFormat<DType::kQ5_1>{});
    case DType::kIQ4_NL: return fn(BlockFormat<DType::kIQ4_NL>{});
    case DType::kQ2_K: return fn(BlockFormat<DType::kQ2_K>{});
    case DType::kQ3_K: return fn(BlockFormat<DType::kQ3_K>{});
    case DType::kQ4_K: return fn(BlockFormat<DType::kQ4_K>{});
    case DType::kQ5_K: return fn(BlockFormat<DType::kQ5_K>{});
    case DType::kQ6_K: return fn(BlockFormat<DType::kQ6_K>{});
    case DType::kIQ4_XS: return fn(BlockFormat<DType::kIQ4_XS>{});
    case DType::kMXFP4: return fn(BlockFormat<DType::kMXFP4>{});
    case DType::kFP8: return fn(BlockFormat<DType::kFP8>{});
    case DType::kQ4_Z: return fn(BlockFormat<DType::kQ4_Z>{});
    case DType::kQ8_Z: return fn(BlockFormat<DType::kQ8_Z>{});
    case DType::kNVFP4: return fn(BlockFormat<DType::kNVFP4>{});
    default: throw Error("internal error: " + std::string(dtype_name(dtype)) + " is not a block type");
  }
}

// Decodes num_blocks consecutive blocks of `dtype` (a block type) into out (num_blocks * block elements).
void dequantize_blocks(DType dtype, const uint8_t* blocks, int64_t num_blocks, float* out);

// The nearest half of a finite float's bits (ties to even); magnitudes below the half range flush to zero.
uint16_t float_to_half(float f);

// Encodes n values (a multiple of 32) as Q8_0 blocks, as ggml's reference quantizer: d = max |x| / 127
// (stored as the nearest half), q = round(x / d). For dummy weights kept in blocks.
void quantize_q8_0(const float* x, int64_t n, uint8_t* out);

}  // namespace cbatch
