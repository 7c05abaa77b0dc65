// Internal to the CPU matmul (cpu_matmul.cpp, cpu_matmul_blocks.cpp): Vec, one panel row of kLanes
// fp32 lanes, and the register tile sizes. Three builds of the same arithmetic (a lane-wise fused
// multiply-add): AVX-512 (16 lanes), AVX2+FMA (8), portable fmaf (8); one binary uses one of them for every
// call. A register tile is kMR rows by kNV panels; a one-row product (a decode step of one sequence, bound
// by streaming the weights) takes kRowNV panels at a time instead.
#pragma once
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace cbatch::matmul_detail {

#if defined(__AVX2__)
// E4M3 codes (one a 16-bit lane) as fp16 bits of the value times 2^-8: the sign to bit 15, the exponent and
// mantissa (bias 7, 3 bits) to bits 13..7, where fp16 (bias 15, 10 bits) reads them as the same number
// scaled by 2^-8, subnormals included. Times 2^17 (exact), +0, it is quant_blocks.hpp's e4m3_value_x512
// in fp32, -0 (code 0x80) made +0 as there.
template <class V>
V e4m3_as_half(V h) {
  if constexpr (sizeof(V) == 32) {
    return _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x80)), 8),
                           _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7F)), 7));
  } else {
    return _mm_or_si128(_mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi16(0x80)), 8),
                        _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7F)), 7));
  }
}
#endif

#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kMR = 8;     // rows per register tile
constexpr int kNV = 3;     // panels per register tile: 24 accumulators of 32 registers
constexpr int kRowNV = 3;
struct Vec {
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec load_to_register(const float* p) { return load(p); }  // see the AVX2 one (not measured here)
  static Vec broadcast(float x) { return {_mm512_set1_ps(x)}; }
  static Vec from_int8(__m128i q) { return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))}; }   // 16 lanes
  static Vec from_uint8(__m128i q) { return {_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q))}; }
  static Vec from_e4m3_x512(__m128i q) {  // 16 lanes (see e4m3_as_half)
    return {_mm512_fmadd_ps(_mm512_cvtph_ps(e4m3_as_half(_mm256_cvtepu8_epi16(q))), _mm512_set1_ps(131072.0f),
                            _mm512_setzero_ps())};
  }
  static Vec mul(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
  static Vec add(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
  static Vec sub(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
  // a * b, hidden from the compiler so that it cannot fuse it into a following add (quant_blocks.hpp).
  static Vec product_rounded(Vec a, Vec b) {
    __m512 p = _mm512_mul_ps(a.v, b.v);
    __asm__("" : "+v"(p));
    return {p};
  }
  void fma(Vec a, Vec b) { v = _mm512_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
};
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
// 12 accumulators of 16 registers. 6 x 2 rather than 4 x 3: with 2 weight vectors and a broadcast beside
// the accumulators, the compiler keeps the weights in registers instead of re-loading them for every
// multiply-add; one core then runs a 128-row product at ~90% of its FMA peak instead of ~50%.
constexpr int kMR = 6;
constexpr int kNV = 2;
constexpr int kRowNV = 4;
struct Vec {
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  // A load the compiler cannot fold into the multiply-adds that use it: GCC 12 folds the weight loads
  // of tiles of 4 rows or fewer, re-loading each weight vector once per row.
  static Vec load_to_register(const float* p) {
    __m256 r = _mm256_loadu_ps(p);
    __asm__("" : "+x"(r));
    return {r};
  }
  static Vec broadcast(float x) { return {_mm256_set1_ps(x)}; }
  static Vec from_int8(__m128i q) { return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))}; }  // low 8 bytes
  static Vec from_uint8(__m128i q) { return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q))}; }
#if defined(__F16C__)
  static Vec from_e4m3_x512(__m128i q) {  // the low 8 bytes (see e4m3_as_half)
    return {_mm256_fmadd_ps(_mm256_cvtph_ps(e4m3_as_half(_mm_cvtepu8_epi16(q))), _mm256_set1_ps(131072.0f),
                            _mm256_setzero_ps())};
  }
#endif
  static Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
  static Vec add(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
  static Vec sub(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
  static Vec product_rounded(Vec a, Vec b) {  // as the AVX-512 one
    __m256 p = _mm256_mul_ps(a.v, b.v);
    __asm__("" : "+x"(p));
    return {p};
  }
  void fma(Vec a, Vec b) { v = _mm256_fmadd_ps(a.v, b.v, v); }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
};
#else
constexpr int kLanes = 8;
constexpr int kMR = 4;
constexpr int kNV = 2;
constexpr int kRowNV = 2;
struct Vec {
  float v[8];
  static Vec zero() { return {}; }
  static Vec load(const float* p) {
    Vec r;
    for (int i = 0; i < 8; ++i) r.v[i] = p[i];
    return r;
  }
  static Vec load_to_register(const float* p) { return load(p); }
  static Vec broadcast(float x) {
    Vec r;
    for (float& e : r.v) e = x;
    return r;
  }
  void fma(Vec a, Vec b) {
    for (int i = 0; i < 8; ++i) v[i] = std::fma(a.v[i], b.v[i], v[i]);
  }
  void store(float* p) const { std::memcpy(p, v, sizeof(v)); }
};
#endif

// The blocked panels decode a group a k at a time with vector instructions where the build has them and
// the fused multiply-add that Q4_1's formula computes (__FP_FAST_FMAF) and fp16 conversions (FP8's codes);
// else lane by lane through the scalar formulas of quant_blocks.hpp.
#if defined(__FP_FAST_FMAF) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)))
#define CBATCH_VECTOR_DECODE 1
#endif

}  // namespace cbatch::matmul_detail
