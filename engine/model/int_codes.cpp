// Integer-code Linears into GGUF blocks (int_codes.hpp). A block's d is the group's scale as an fp16 (checked
// exact), its codes the integer codes (biased by 8 or 16, or as int8; Q4_Z and Q8_Z: the unsigned codes and
// the group's zero point), so the block's values, d * code, are the bits of scale * code: the blocks are a
// tensor of exactly the dequantized weights.
#include "engine/model/int_codes.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <numeric>

#include "engine/model/quant_blocks.hpp"
#include "engine/model/quantized_parts.hpp"
#include "engine/model/tensor.hpp"

namespace cbatch {
namespace {

constexpr int64_t kBlock = 32;

bool is_half(float f) {
  const uint16_t h = float_to_half(f);
  const uint8_t bytes[2] = {static_cast<uint8_t>(h & 0xFF), static_cast<uint8_t>(h >> 8)};
  const float back = load_half(bytes);
  return std::memcmp(&back, &f, sizeof f) == 0;
}

bool is_contiguous(const IntCodes& c) {
  for (int64_t k = 0; k < c.in; ++k) {
    if (c.groups[static_cast<size_t>(k)] != k / c.group_rows()) return false;
  }
  return true;
}

// The inputs sorted by group, stable: the stored column j holds input order[j].
std::vector<int32_t> group_order(const IntCodes& c) {
  std::vector<int32_t> order(static_cast<size_t>(c.in));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return c.groups[static_cast<size_t>(a)] < c.groups[static_cast<size_t>(b)];
  });
  return order;
}

// The least and greatest stored code q = code + zero (a zero-point type's codes), and zero point.
struct ZeroRanges {
  int q_lo = 0, q_hi = 0, zero_lo = 0, zero_hi = 0;
};
ZeroRanges zero_ranges(const IntCodes& c) {
  ZeroRanges r{INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN};
  for (int64_t o = 0; o < c.out; ++o) {
    const int16_t* zeros = &c.zeros[static_cast<size_t>(o * c.num_groups)];
    for (int64_t k = 0; k < c.in; ++k) {
      const int q = c.codes[static_cast<size_t>(o * c.in + k)] + zeros[c.groups[static_cast<size_t>(k)]];
      r.q_lo = std::min(r.q_lo, q);
      r.q_hi = std::max(r.q_hi, q);
    }
  }
  for (const int16_t z : c.zeros) {
    r.zero_lo = std::min<int>(r.zero_lo, z);
    r.zero_hi = std::max<int>(r.zero_hi, z);
  }
  return r;
}

// One block of 32 codes q (in the block's type's range) with scale d and, for Q4_Z and Q8_Z, zero point z
// (stored: q + z and z), in ggml's layout (Q4_Z, Q8_Z: quant_blocks.hpp's).
void write_block(DType dtype, float d, int z, const int* q, uint8_t* out) {
  const uint16_t h = float_to_half(d);
  out[0] = static_cast<uint8_t>(h & 0xFF);
  out[1] = static_cast<uint8_t>(h >> 8);
  if (dtype == DType::kQ8_0) {
    for (int e = 0; e < kBlock; ++e) out[2 + e] = static_cast<uint8_t>(static_cast<int8_t>(q[e]));
    return;
  }
  if (dtype == DType::kQ8_Z) {  // q + z and z less 128, as signed bytes
    out[2] = static_cast<uint8_t>(z - 128);
    out[3] = 0;
    for (int e = 0; e < kBlock; ++e) out[4 + e] = static_cast<uint8_t>(q[e] + z - 128);
    return;
  }
  if (dtype == DType::kQ4_Z) {
    out[2] = static_cast<uint8_t>(z);
    out[3] = 0;
    for (int e = 0; e < 16; ++e) out[4 + e] = static_cast<uint8_t>((q[e] + z) | (q[e + 16] + z) << 4);
    return;
  }
  const int bias = dtype == DType::kQ4_0 ? 8 : 16;
  uint8_t* qs = out + (dtype == DType::kQ4_0 ? 2 : 6);
  uint32_t high = 0;  // Q5_0: the fifth bit of element e at bit e
  for (int e = 0; e < 16; ++e) {
    const int lo = q[e] + bias, hi = q[e + 16] + bias;
    qs[e] = static_cast<uint8_t>((lo & 0x0F) | (hi & 0x0F) << 4);
    high |= static_cast<uint32_t>(lo >> 4 & 1) << e | static_cast<uint32_t>(hi >> 4 & 1) << (e + 16);
  }
  if (dtype == DType::kQ5_0) std::memcpy(out + 2, &high, 4);  // little-endian, as the file
}

}  // namespace

std::vector<float> int_codes_dequantize(const IntCodes& c) {
  std::vector<float> w(static_cast<size_t>(c.out * c.in));
  for (int64_t o = 0; o < c.out; ++o) {
    const float* scales = &c.scales[static_cast<size_t>(o * c.num_groups)];
    for (int64_t k = 0; k < c.in; ++k) {
      const size_t i = static_cast<size_t>(o * c.in + k);
      w[i] = scales[c.groups[static_cast<size_t>(k)]] * static_cast<float>(c.codes[i]);
    }
  }
  return w;
}

DType int_codes_block_type(const IntCodes& c) {
  if (c.in % kBlock != 0 || c.group_rows() % kBlock != 0) return DType::kF32;
  for (const float s : c.scales) {
    if (!is_half(s)) return DType::kF32;
  }
  const auto [lo, hi] = std::minmax_element(c.codes.begin(), c.codes.end());
  if (lo == c.codes.end()) return DType::kF32;
  if (*lo >= -8 && *hi <= 7) return DType::kQ4_0;
  const bool has_zeros = c.zeros.size() == c.scales.size();
  const ZeroRanges z = has_zeros ? zero_ranges(c) : ZeroRanges{};
  const bool zeros_fit = has_zeros && z.zero_lo >= 0 && z.zero_hi <= 255;
  if (zeros_fit && z.q_lo >= 0 && z.q_hi <= 15) return DType::kQ4_Z;
  if (*lo >= -16 && *hi <= 15) return DType::kQ5_0;
  if (*lo >= -128 && *hi <= 127) return DType::kQ8_0;
  if (zeros_fit && z.q_lo >= 0 && z.q_hi <= 255) return DType::kQ8_Z;
  return DType::kF32;
}

OwnedTensor int_codes_tensor(const std::string& name, const IntCodes& c) {
  const DType dtype = int_codes_block_type(c);
  if (dtype == DType::kF32) return owned_f32(name, c.out, c.in, int_codes_dequantize(c));
  const bool permuted = !is_contiguous(c);
  std::vector<int32_t> order(static_cast<size_t>(c.in));
  if (permuted) {
    order = group_order(c);
  } else {
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t stride = row_bytes(dtype, c.in);
  const size_t block_bytes = static_cast<size_t>(c.out * stride);
  const size_t order_at = (block_bytes + 3) / 4 * 4;
  auto bytes = std::make_shared<std::vector<uint8_t>>(order_at + (permuted ? order.size() * 4 : 0));
  int q[kBlock];
  for (int64_t o = 0; o < c.out; ++o) {
    const int16_t* codes = &c.codes[static_cast<size_t>(o * c.in)];
    for (int64_t b = 0; b < c.in / kBlock; ++b) {
      const int32_t* inputs = &order[static_cast<size_t>(b * kBlock)];
      for (int e = 0; e < kBlock; ++e) q[e] = codes[inputs[e]];
      const size_t group = static_cast<size_t>(o * c.num_groups + c.groups[static_cast<size_t>(inputs[0])]);
      const int z = c.zeros.empty() ? 0 : c.zeros[group];
      write_block(dtype, c.scales[group], z, q, bytes->data() + o * stride + b * dtype_block_bytes(dtype));
    }
  }
  OwnedTensor t;
  t.view.name = name;
  t.view.dtype = dtype;
  t.view.rows = c.out;
  t.view.cols = c.in;
  t.view.data = bytes->data();
  if (permuted) {
    std::memcpy(bytes->data() + order_at, order.data(), order.size() * 4);
    t.view.input_order = reinterpret_cast<const int32_t*>(bytes->data() + order_at);
  }
  t.bytes = std::move(bytes);
  return t;
}

}  // namespace cbatch
