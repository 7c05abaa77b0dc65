// Blocked panels of the CPU matmul (layout: cpu_matmul_blocks.hpp): regrouping a panel's rows of GGUF
// blocks at load, and decoding a whole panel to fp32. A block column (one ggml block of each lane) becomes
// block-elements / 32 groups: each lane's sub-block scales go to the groups' scale arrays, its codes to a
// row of 32 per group (Q8_0, Q4_0, Q4_1, IQ4_NL and MXFP4: straight from the block), and the rows are transposed
// into k-major order.
#include "engine/cpu/cpu_matmul_blocks.hpp"

namespace cbatch::matmul_detail {
namespace {

#if defined(__SSE2__)
template <int W>  // interleave the W-byte elements of a and b: the low halves, then the high halves
__m128i interleave_low(__m128i a, __m128i b) {
  if constexpr (W == 1) return _mm_unpacklo_epi8(a, b);
  if constexpr (W == 2) return _mm_unpacklo_epi16(a, b);
  if constexpr (W == 4) return _mm_unpacklo_epi32(a, b);
  if constexpr (W == 8) return _mm_unpacklo_epi64(a, b);
}
template <int W>
__m128i interleave_high(__m128i a, __m128i b) {
  if constexpr (W == 1) return _mm_unpackhi_epi8(a, b);
  if constexpr (W == 2) return _mm_unpackhi_epi16(a, b);
  if constexpr (W == 4) return _mm_unpackhi_epi32(a, b);
  if constexpr (W == 8) return _mm_unpackhi_epi64(a, b);
}

// N rows of 16 bytes (N = 2, 4, 8 or 16; row r, byte b) written column by column: out[b * N + r]. Each
// round interleaves neighbouring rows at twice the width of the round before; the low halves hold the
// lower columns, so writing the low half before the high half keeps the columns in order. Returns the
// end of what was written (16 N bytes).
template <int N, int W = 1>
uint8_t* store_columns(const __m128i (&rows)[N], uint8_t* out) {
  if constexpr (N == 1) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), rows[0]);
    return out + 16;
  } else {
    __m128i low[N / 2], high[N / 2];
    for (int i = 0; i < N / 2; ++i) {
      low[i] = interleave_low<W>(rows[2 * i], rows[2 * i + 1]);
      high[i] = interleave_high<W>(rows[2 * i], rows[2 * i + 1]);
    }
    return store_columns<N / 2, 2 * W>(high, store_columns<N / 2, 2 * W>(low, out));
  }
}

__m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
#endif

// The codes of one group: src[l] is lane l's 32 k, 32 bytes (bytes) or 16 bytes of nibbles (element i in
// the low nibble of byte i, i + 16 in the high one); codes (32, kLanes bytes or kHalf bytes) k-major.
void put_byte_codes(const uint8_t* const (&src)[kLanes], uint8_t* codes) {
#if defined(__SSE2__)
  __m128i rows[kLanes];  // a kLanes x 32 transpose, in two halves of 16 k
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < kLanes; ++l) rows[l] = load16(src[l] + 16 * half);
    store_columns(rows, codes + 16 * half * kLanes);
  }
#else
  for (int l = 0; l < kLanes; ++l)
    for (int i = 0; i < kGroupK; ++i) codes[i * kLanes + l] = src[l][i];
#endif
}

void put_nibble_codes(const uint8_t* const (&src)[kLanes], uint8_t* codes) {
#if defined(__SSE2__)
  // Pair the lanes first (row j: byte i is the code byte of k i, or of k i + 16), then transpose.
  const __m128i low4 = _mm_set1_epi8(0x0F), high4 = _mm_set1_epi8(static_cast<char>(0xF0));
  __m128i first[kHalf], second[kHalf];  // k 0..15, k 16..31
  for (int j = 0; j < kHalf; ++j) {
    const __m128i a = load16(src[j]), b = load16(src[j + kHalf]);
    first[j] = _mm_or_si128(_mm_and_si128(a, low4), _mm_and_si128(_mm_slli_epi16(b, 4), high4));
    second[j] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), low4), _mm_and_si128(b, high4));
  }
  store_columns(second, store_columns(first, codes));
#else
  for (int i = 0; i < kGroupK / 2; ++i) {
    for (int j = 0; j < kHalf; ++j) {
      const uint8_t a = src[j][i], b = src[j + kHalf][i];
      codes[i * kHalf + j] = static_cast<uint8_t>((a & 0x0F) | (b & 0x0F) << 4);
      codes[(i + kGroupK / 2) * kHalf + j] = static_cast<uint8_t>(a >> 4 | (b & 0xF0));
    }
  }
#endif
}

// out[e] = F::code(block, e) as a byte, for the whole block, one 32-element row at a time: through the
// format's row_code where it has one (the K-quants: a loop the compiler vectorizes; the element-wise code()
// was most of a load), else code().
template <class F>
void block_codes(const uint8_t* block, uint8_t* out) {
  for (int j = 0; j < F::kElems / kGroupK; ++j) {
    for (int i = 0; i < kGroupK; ++i) {
      if constexpr (requires { F::row_code(block, j, i); }) {
        out[j * kGroupK + i] = static_cast<uint8_t>(F::row_code(block, j, i));
      } else {
        out[j * kGroupK + i] = static_cast<uint8_t>(F::code(block, j * kGroupK + i));
      }
    }
  }
}

// One block column of a panel: blocks[l] is lane l's block (nullptr past N); groups: F::kElems / 32.
template <class F>
void pack_block_column(const uint8_t* const (&blocks)[kLanes], uint8_t* groups) {
  using L = GroupLayout<F>;
  constexpr int kGroups = F::kElems / kGroupK;
  constexpr int kRowBytes = L::kNibbles ? kGroupK / 2 : kGroupK;  // a lane's codes of one group
  static_assert(F::kRawCodes < 0 || kGroups == 1);
  alignas(16) uint8_t rows[kLanes][kGroups * kRowBytes];  // the lanes' codes, group by group
  const uint8_t* src[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint8_t* block = blocks[l];
    for (int j = 0; j < F::kElems / F::kSubElems; ++j) {
      const ScaleOffset so = block != nullptr ? F::scale(block, j) : ScaleOffset{0.0f, 0.0f};
      float* sub = reinterpret_cast<float*>(groups + (j / L::kSubs) * L::kBytes) + (j % L::kSubs) * L::kSubFloats;
      sub[l] = so.scale;
      if constexpr (L::kHasOffset) sub[kLanes + l] = so.offset;
    }
    src[l] = rows[l];
    if (block == nullptr) {
      const uint8_t zero = L::zero_code();
      std::memset(rows[l], L::kNibbles ? zero | zero << 4 : zero, sizeof(rows[l]));
    } else if constexpr (F::kRawCodes >= 0) {
      src[l] = block + F::kRawCodes;
    } else if constexpr (L::kNibbles) {
      alignas(16) uint8_t codes[F::kElems];
      block_codes<F>(block, codes);
      for (int g = 0; g < kGroups; ++g) {
        for (int i = 0; i < kGroupK / 2; ++i) {
          const int e = g * kGroupK + i;
          rows[l][g * kRowBytes + i] = static_cast<uint8_t>(codes[e] | codes[e + 16] << 4);
        }
      }
    } else {
      block_codes<F>(block, rows[l]);
    }
  }
  for (int g = 0; g < kGroups; ++g) {
    const uint8_t* group_src[kLanes];
    for (int l = 0; l < kLanes; ++l) group_src[l] = src[l] + g * kRowBytes;
    uint8_t* codes = groups + g * L::kBytes + L::kScaleBytes;
    if constexpr (L::kNibbles) {
      put_nibble_codes(group_src, codes);
    } else {
      put_byte_codes(group_src, codes);
    }
  }
}

template <class F>
void unpack_panel(const uint8_t* panel, int64_t k, float* out) {
  using L = GroupLayout<F>;
  for (int64_t b = 0; b < k / kGroupK; ++b) {
    BlockedGroup<F> group(panel + b * L::kBytes);
    for (int sub = 0; sub < L::kSubs; ++sub) {
      group.select(sub);
      for (int i = sub * L::kSubK; i < (sub + 1) * L::kSubK; ++i) {
        group.weights(i).store(out + (b * kGroupK + i) * kLanes);
      }
    }
  }
}

}  // namespace

size_t blocked_group_bytes(DType dtype) {
  return with_block_format(dtype, [](auto format) { return GroupLayout<decltype(format)>::kBytes; });
}

void pack_blocked_panel(DType dtype, const uint8_t* const (&rows)[kLanes], int64_t k, uint8_t* panel) {
  with_block_format(dtype, [&](auto format) {
    using F = decltype(format);
    for (int64_t c = 0; c < k / F::kElems; ++c) {
      const uint8_t* blocks[kLanes];
      for (int l = 0; l < kLanes; ++l) blocks[l] = rows[l] != nullptr ? rows[l] + c * F::kBytes : nullptr;
      pack_block_column<F>(blocks, panel + c * (F::kElems / kGroupK) * GroupLayout<F>::kBytes);
    }
  });
}

void unpack_blocked_panel(DType dtype, const uint8_t* panel, int64_t k, float* out) {
  with_block_format(dtype, [&](auto format) { unpack_panel<decltype(format)>(panel, k, out); });
}

}  // namespace cbatch::matmul_detail
