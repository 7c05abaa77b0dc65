// The int8 matmul's scalar kernel (format: cpu_int8_format.hpp): one row and one panel at a time, lane by
// lane, each sub-block's product an exact int32 sum then the fp32 steps in the header's fixed order. It is
// the reference the vector kernels (cpu_int8_avx2.cpp, cpu_int8_avx512.cpp) match bit for bit, and the
// path of a CPU that runs neither.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/cpu_int8_format.hpp"
#include "engine/cpu/cpu_int8_kernels.hpp"

namespace cbatch::matmul_detail {
namespace {

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
        if constexpr (L::kZeroPoints) isum -= int8_zero<F>(panel, b, l) * sum_q;
        for (int t = sub * L::kQuadsPerSub; t < (sub + 1) * L::kQuadsPerSub; ++t) {
          for (int j = 0; j < 4; ++j) isum += panel_code<F>(codes, t, l * 4 + j) * q[b * kGroupK + 4 * t + j];
        }
        if constexpr (L::kSuper) {
          tot[l] += super_sc<F>(panel, b, sub, l) * isum;
          if constexpr (G::kHasOffset) mins[l] += super_m<F>(panel, b, sub, l) * sum_q;
          continue;
        }
        acc[l] = std::fma(int8_scale<F>(panel, b, s + l) * d[b], static_cast<float>(isum), acc[l]);
        if constexpr (L::kOffset) {
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

}  // namespace

void run_int8_panels_scalar(DType dtype, bool planes, const Q8Rows& x, int64_t row_begin, int64_t row_end,
                            const uint8_t* panels, size_t panel_bytes, int64_t panel_begin, int64_t panel_end,
                            float* y, int64_t ldy, int64_t n) {
  with_int8_format(dtype, planes, [&](auto format) {
    using F = decltype(format);
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      const uint8_t* panel = panels + p * panel_bytes;
      const int64_t cols = n - p * kLanes;
      float* yp = y + p * kLanes;
      for (int64_t r = row_begin; r < row_end; ++r) panel_row_scalar<F>(x, r, panel, yp + r * ldy, cols);
    }
  });
}

}  // namespace cbatch::matmul_detail
