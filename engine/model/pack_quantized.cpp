// compressed-tensors pack-quantized expansion (pack_quantized.hpp): weight_shape gives the input width
// (weight_packed may pad it); the other tensors' shapes follow from it and the strategy.
#include "engine/model/pack_quantized.hpp"

#include <algorithm>
#include <cstring>

namespace cbatch {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// weight_shape's [out, in], I32 or I64.
std::vector<int64_t> weight_shape(const QuantizedParts& parts) {
  const SafetensorsTensor& t = parts.stored("weight_shape");
  if (t.dtype != "I32" && t.dtype != "I64") parts.fail("weight_shape", "has dtype " + t.dtype + ", expected I32 or I64");
  if (t.shape != std::vector<int64_t>{2}) parts.fail("weight_shape", "has shape " + shape_list(t.shape) + ", expected [2]");
  const uint8_t* bytes = parts.bytes("weight_shape");
  std::vector<int64_t> out(2);
  for (int d = 0; d < 2; ++d) {
    if (t.dtype == "I64") {
      std::memcpy(&out[static_cast<size_t>(d)], bytes + 8 * d, 8);
    } else {
      int32_t v;
      std::memcpy(&v, bytes + 4 * d, 4);
      out[static_cast<size_t>(d)] = v;
    }
  }
  if (out[0] <= 0 || out[1] <= 0) parts.fail("weight_shape", "holds " + shape_list(out) + ", not a matrix's shape");
  return out;
}

}  // namespace

IntCodes packed_int_codes(const PackedIntShape& s, const uint32_t* packed, const uint32_t* zero_words,
                          const float* scales, const int32_t* groups) {
  IntCodes c;
  c.out = s.out, c.in = s.in, c.num_groups = s.num_groups;
  c.codes.resize(static_cast<size_t>(s.out * s.in));
  c.scales.assign(scales, scales + s.out * s.num_groups);
  c.zeros.resize(c.scales.size());
  c.groups.assign(groups, groups + s.in);
  const int per_word = 32 / s.bits;
  const uint32_t mask = (1u << s.bits) - 1;
  const int offset = 1 << (s.bits - 1);
  const int64_t row_words = ceil_div(s.in, per_word);
  for (int64_t o = 0; o < s.out; ++o) {
    const int zero_shift = static_cast<int>(o % per_word) * s.bits;
    for (int64_t k = 0; k < s.in; ++k) {
      const int64_t g = groups[k];
      const int code = static_cast<int>((packed[o * row_words + k / per_word] >> ((k % per_word) * s.bits)) & mask);
      const int zero = zero_words == nullptr
                           ? offset
                           : static_cast<int>((zero_words[(o / per_word) * s.num_groups + g] >> zero_shift) & mask);
      c.codes[static_cast<size_t>(o * s.in + k)] = static_cast<int16_t>(code - zero);
      c.zeros[static_cast<size_t>(o * s.num_groups + g)] = static_cast<int16_t>(zero);
    }
  }
  return c;
}

void packed_int_dequantize(const PackedIntShape& s, const uint32_t* packed, const uint32_t* zero_words,
                           const float* scales, const int32_t* groups, float* w) {
  const std::vector<float> values = int_codes_dequantize(packed_int_codes(s, packed, zero_words, scales, groups));
  std::copy(values.begin(), values.end(), w);
}

OwnedTensor read_pack_quantized(const TensorFileOf& file_of, const std::string& weight_name,
                                const QuantizationConfig& q) {
  const QuantizedParts parts(file_of, weight_name, "pack-quantized");
  const std::vector<int64_t> shape = weight_shape(parts);
  PackedIntShape s;
  s.bits = q.bits;
  s.out = shape[0];
  s.in = shape[1];
  const int per_word = 32 / s.bits;
  parts.entry("weight_packed", "I32");
  parts.expect_shape("weight_packed", {s.out, ceil_div(s.in, per_word)}, "out, in * bits / 32 rounded up");
  const int64_t group_rows = q.strategy == "group" ? q.group_size : s.in;
  if (s.in % group_rows != 0) {
    parts.fail("weight_packed", "has an input width of " + std::to_string(s.in) + ", which the group size " +
                                    std::to_string(group_rows) + " does not divide");
  }
  s.num_groups = s.in / group_rows;
  parts.expect_shape("weight_scale", {s.out, s.num_groups}, "out, groups");
  std::vector<int32_t> groups(static_cast<size_t>(s.in));
  for (int64_t k = 0; k < s.in; ++k) groups[static_cast<size_t>(k)] = static_cast<int32_t>(k / group_rows);
  if (parts.has("weight_g_idx")) groups = checked_groups(parts, "weight_g_idx", s.in, s.num_groups, group_rows);
  std::vector<uint32_t> zeros;
  if (!q.sym) {
    parts.expect_shape("weight_zero_point", {ceil_div(s.out, per_word), s.num_groups}, "out * bits / 32 rounded up, groups");
    zeros = parts.words("weight_zero_point");
  }
  const std::vector<uint32_t> packed = parts.words("weight_packed");
  const std::vector<float> scales = parts.floats("weight_scale");
  const uint32_t* zero_words = q.sym ? nullptr : zeros.data();
  return int_codes_tensor(parts.name("weight_packed"),
                          packed_int_codes(s, packed.data(), zero_words, scales.data(), groups.data()));
}

}  // namespace cbatch
