// Internal to the CPU matmul: weights kept in a GGUF block type, regrouped by panel. A blocked panel is
// K / 32 groups, one per 32 k. A group holds, per sub-block of its k (one, or two of 16 k for Q2_K, Q3_K,
// Q6_K), the lanes' fp32 scales s[kLanes] and, for the types with an offset, their offsets b[kLanes]
// (K-quant scales and minimums multiplied out at load; Q4_Z's and Q8_Z's integer zero points); then the
// codes of its 32 k in k order: a byte per lane (int8 values: Q8_0, Q8_Z, Q5_*, Q5_K, Q6_K), or kLanes / 2
// bytes of nibbles whose low nibble is lane j and high nibble lane j + kLanes / 2 (Q4_*, Q2_K, Q3_K, Q4_K,
// IQ4_*, MXFP4: a nibble's value through the type's 16-entry table; FP8's E4M3 bytes through fp16, as
// e4m3_as_half). A group decodes to exactly the values tensor_rows_to_f32 gives, through the formulas
// of quant_blocks.hpp; lanes past N decode to +0, as the fp32 panels' padding.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "engine/cpu/cpu_matmul_vec.hpp"
#include "engine/model/quant_blocks.hpp"

namespace cbatch::matmul_detail {

constexpr int kGroupK = 32;  // k per group
constexpr int kHalf = kLanes / 2;

template <class F>
constexpr std::array<int8_t, 16> nibble_values() {
  std::array<int8_t, 16> values{};
  for (int c = 0; c < 16; ++c) values[c] = static_cast<int8_t>(F::value(c));
  return values;
}

// The layout of a group of format F (a BlockFormat).
template <class F>
struct GroupLayout {
  static constexpr bool kNibbles = F::kCodeBits == 4;
  static constexpr bool kE4M3 = std::is_same_v<F, BlockFormat<DType::kFP8>>;  // bytes that are E4M3 codes
  static constexpr int kSubs = kGroupK / F::kSubElems;  // scale sets per group: 1 or 2
  static constexpr int kSubK = kGroupK / kSubs;
  static constexpr bool kHasOffset = F::kFormula != Formula::kScaled;
  static constexpr int kSubFloats = (kHasOffset ? 2 : 1) * kLanes;  // s[kLanes] (, b[kLanes])
  static constexpr size_t kScaleBytes = static_cast<size_t>(kSubs * kSubFloats) * sizeof(float);
  static constexpr int kCodeBytesPerK = kNibbles ? kHalf : kLanes;
  static constexpr size_t kBytes = kScaleBytes + kGroupK * kCodeBytesPerK;
  alignas(16) static constexpr std::array<int8_t, 16> kValues = nibble_values<F>();
  static constexpr bool kIdentityValues = F::value(0) == 0 && F::value(15) == 15;
  // A code that decodes to +0 with a zero scale (a non-negative value), for the lanes past N.
  static constexpr uint8_t zero_code() {
    if constexpr (!kNibbles) return 0;
    uint8_t c = 0;
    while (F::value(c) < 0) ++c;
    return c;
  }
};

// GCC 12 warns about the deliberately undefined pass-through operand inside the AVX-512 conversion
// intrinsics when they are inlined (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// One group of one panel: select(sub) loads a sub-block's scales, weights(i) decodes the lanes' fp32
// weights at k i of the group (i in that sub-block).
template <class F>
class BlockedGroup {
  using L = GroupLayout<F>;

 public:
  BlockedGroup() = default;
  explicit BlockedGroup(const uint8_t* group)
      : scales_(reinterpret_cast<const float*>(group)), codes_(group + L::kScaleBytes) {}

  void select(int sub) {
    sub_ = scales_ + sub * L::kSubFloats;
#ifdef CBATCH_VECTOR_DECODE
    vs_ = Vec::load(sub_);
    if constexpr (L::kHasOffset) vb_ = Vec::load(sub_ + kLanes);
#endif
  }

  Vec weights(int i) const {
#ifdef CBATCH_VECTOR_DECODE
    if constexpr (L::kE4M3) return Vec::mul(vs_, Vec::from_e4m3_x512(values(i)));
    const Vec v = Vec::from_int8(values(i));
    if constexpr (F::kFormula == Formula::kScaled) {
      return Vec::mul(vs_, v);
    } else if constexpr (F::kFormula == Formula::kScaledOffset) {
      return Vec::add(Vec::product_rounded(vs_, v), vb_);
    } else if constexpr (F::kFormula == Formula::kScaledZero) {
      return Vec::mul(vs_, Vec::sub(v, vb_));
    } else {
      Vec w = vb_;  // fma(v, s, b)
      w.fma(v, vs_);
      return w;
    }
#else
    float w[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      int value;
      if constexpr (L::kNibbles) {
        const uint8_t b = codes_[i * kHalf + l % kHalf];
        value = L::kValues[l < kHalf ? b & 0x0F : b >> 4];
      } else if constexpr (L::kE4M3) {
        value = F::value(codes_[i * kLanes + l]);
      } else {
        value = static_cast<int8_t>(codes_[i * kLanes + l]);
      }
      w[l] = weight_value<F::kFormula>({sub_[l], L::kHasOffset ? sub_[kLanes + l] : 0.0f}, value);
    }
    return Vec::load(w);
#endif
  }

 private:
#ifdef CBATCH_VECTOR_DECODE
  // The kLanes int8 values of k i (in the low bytes).
  __m128i values(int i) const {
    if constexpr (!L::kNibbles) {
      const auto* p = reinterpret_cast<const __m128i*>(codes_ + i * kLanes);
      return kLanes == 16 ? _mm_loadu_si128(p) : _mm_loadl_epi64(p);
    } else {
      const __m128i low4 = _mm_set1_epi8(0x0F);
      __m128i b;
      if constexpr (kLanes == 16) {
        b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes_ + i * kHalf));
      } else {
        int32_t bytes;
        std::memcpy(&bytes, codes_ + i * kHalf, sizeof(bytes));
        b = _mm_cvtsi32_si128(bytes);
      }
      const __m128i low = _mm_and_si128(b, low4), high = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
      const __m128i codes = kLanes == 16 ? _mm_unpacklo_epi64(low, high) : _mm_unpacklo_epi32(low, high);
      if constexpr (L::kIdentityValues) return codes;
      return _mm_shuffle_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(L::kValues.data())), codes);
    }
  }
  Vec vs_, vb_;
#endif

  const float* scales_ = nullptr;  // (kSubs, kSubFloats)
  const float* sub_ = nullptr;     // the selected sub-block's s[kLanes] (, b[kLanes])
  const uint8_t* codes_ = nullptr;
};

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Bytes of one group of `dtype` (a block type).
size_t blocked_group_bytes(DType dtype);
// Regroups one panel: rows[l] is the K / block-elements consecutive blocks of lane l's row of W (nullptr
// past N). panel: (K / 32) groups.
void pack_blocked_panel(DType dtype, const uint8_t* const (&rows)[kLanes], int64_t k, uint8_t* panel);
// A blocked panel as fp32 (K, kLanes).
void unpack_blocked_panel(DType dtype, const uint8_t* panel, int64_t k, float* out);

}  // namespace cbatch::matmul_detail
