// Block layouts (bytes, in order) follow ggml's; values and their rounding follow the `gguf` package.
#include "engine/model/quant_blocks.hpp"

#include <cstring>

namespace cbatch {
namespace {

constexpr int kSuper = 256;  // elements of a K-quant or IQ4_XS super-block
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q4_K/Q5_K: eight 6-bit scales and mins packed in 12 bytes.
void kquant_scale_min(const uint8_t* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
    min = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
  }
}

// Q5_0 (d, qh u32, qs[16]) and Q5_1 (d, m, qh, qs): element j's low nibble and its fifth bit.
int q5_code(const uint8_t* qh4, const uint8_t* qs, int j) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  const int low = j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
  return low | static_cast<int>(((qh >> j) & 1u) << 4);
}

void q2_k(const uint8_t* b, float* out) {  // scales[16], qs[64], d, dmin
  const float d = half(b + 80), dmin = half(b + 82);
  for (int e = 0; e < kSuper; ++e) {
    const int h = e / 128, s = (e % 128) / 32, l = e % 32;
    const int q = (b[16 + h * 32 + l] >> (2 * s)) & 3;
    const uint8_t sc = b[e / 16];
    const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
    out[e] = dl * static_cast<float>(q) - ml;
  }
}

void q3_k(const uint8_t* b, float* out) {  // hmask[32], qs[64], scales[12], d
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = half(b + 108);
  for (int e = 0; e < kSuper; ++e) {
    const int i = e / 16;  // sub-block
    const int low = i < 8 ? sc[i] & 0x0F : sc[i - 8] >> 4;
    const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    const float dl = d * static_cast<float>(static_cast<int8_t>(low | (high << 4)) - 32);
    const int h = e / 128, s = (e % 128) / 32, l = e % 32;
    const int ql = (qs[h * 32 + l] >> (2 * s)) & 3;
    const int bit = (hmask[e % 32] >> (e / 32)) & 1;
    out[e] = dl * static_cast<float>(ql - ((bit ^ 1) << 2));
  }
}

void q4_k(const uint8_t* b, float* out, bool five_bits) {  // d, dmin, scales[12], (qh[32],) qs[128]
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (five_bits ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    kquant_scale_min(b + 4, j, scale, min);
    const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
    for (int l = 0; l < 32; ++l) {
      int q = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F;
      if (five_bits) q |= ((qh[l] >> j) & 1) << 4;
      out[j * 32 + l] = dl * static_cast<float>(q) - ml;
    }
  }
}

void q6_k(const uint8_t* b, float* out) {  // ql[128], qh[64], scales[16] (int8), d
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int e = 0; e < kSuper; ++e) {
    const int h = e / 128, r = e % 128;
    const int low = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
    const int high = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
    const float dl = d * static_cast<float>(scales[e / 16]);
    out[e] = dl * static_cast<float>(static_cast<int8_t>(low | (high << 4)) - 32);
  }
}

void iq4_xs(const uint8_t* b, float* out) {  // d, scales_h u16, scales_l[4], qs[128]
  const float d = half(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 8; ++j) {
    const int low = (scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
    const int high = (scales_h >> (2 * j)) & 3;
    const float dl = d * static_cast<float>(static_cast<int8_t>(low | (high << 4)) - 32);
    for (int l = 0; l < 32; ++l) {
      const int q = (qs[j * 16 + l % 16] >> (4 * (l / 16))) & 0x0F;
      out[j * 32 + l] = dl * static_cast<float>(kIq4Values[q]);
    }
  }
}

}  // namespace

void dequantize_quant_block(DType dtype, const uint8_t* b, float* out) {
  switch (dtype) {
    case DType::kQ5_0: {
      const float d = half(b);
      for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(q5_code(b + 2, b + 6, j) - 16);
      return;
    }
    case DType::kQ5_1: {
      const float d = half(b), m = half(b + 2);
      for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(q5_code(b + 4, b + 8, j)) + m;
      return;
    }
    case DType::kIQ4_NL: {
      const float d = half(b);
      for (int j = 0; j < 32; ++j) {
        const int q = j < 16 ? b[2 + j] & 0x0F : b[2 + j - 16] >> 4;
        out[j] = d * static_cast<float>(kIq4Values[q]);
      }
      return;
    }
    case DType::kQ2_K: return q2_k(b, out);
    case DType::kQ3_K: return q3_k(b, out);
    case DType::kQ4_K: return q4_k(b, out, false);
    case DType::kQ5_K: return q4_k(b, out, true);
    case DType::kQ6_K: return q6_k(b, out);
    case DType::kIQ4_XS: return iq4_xs(b, out);
    default: return;
  }
}

}  // namespace cbatch
