// AWQ GEMM unpacking (awq.hpp).
#include "engine/model/awq.hpp"

#include <algorithm>

namespace cbatch {

IntCodes awq_codes(int64_t in, int64_t out, int64_t group_size, const uint32_t* qweight, const uint32_t* qzeros,
                   const float* scales) {
  IntCodes c;
  c.out = out, c.in = in, c.num_groups = in / group_size;
  c.codes.resize(static_cast<size_t>(out * in));
  c.scales.resize(static_cast<size_t>(out * c.num_groups));
  c.zeros.resize(c.scales.size());
  c.groups.resize(static_cast<size_t>(in));
  const int64_t words = out / 8;
  for (int64_t k = 0; k < in; ++k) {
    const int64_t g = k / group_size;
    c.groups[static_cast<size_t>(k)] = static_cast<int32_t>(g);
    for (int64_t w = 0; w < words; ++w) {
      const uint32_t codes = qweight[k * words + w], zeros = qzeros[g * words + w];
      for (int nibble = 0; nibble < 8; ++nibble) {
        const int64_t o = w * 8 + kAwqNibbleColumn[nibble];
        const int code = static_cast<int>((codes >> (4 * nibble)) & 0xF);
        const int zero = static_cast<int>((zeros >> (4 * nibble)) & 0xF);
        c.codes[static_cast<size_t>(o * in + k)] = static_cast<int16_t>(code - zero);
        c.zeros[static_cast<size_t>(o * c.num_groups + g)] = static_cast<int16_t>(zero);
      }
    }
  }
  for (int64_t g = 0; g < c.num_groups; ++g) {
    for (int64_t o = 0; o < out; ++o) c.scales[static_cast<size_t>(o * c.num_groups + g)] = scales[g * out + o];
  }
  return c;
}

void awq_dequantize(int64_t in, int64_t out, int64_t group_size, const uint32_t* qweight, const uint32_t* qzeros,
                    const float* scales, float* w) {
  const std::vector<float> values = int_codes_dequantize(awq_codes(in, out, group_size, qweight, qzeros, scales));
  std::copy(values.begin(), values.end(), w);
}

OwnedTensor read_awq(const TensorFileOf& file_of, const std::string& weight_name, const QuantizationConfig& q) {
  const QuantizedParts parts(file_of, weight_name, "AWQ");
  const SafetensorsTensor& qweight = parts.entry("qweight", "I32");
  if (qweight.shape.size() != 2 || qweight.shape[0] == 0 || qweight.shape[1] == 0) {
    parts.fail("qweight", "has shape " + shape_list(qweight.shape) + ", expected [in, out / 8]");
  }
  const int64_t in = qweight.shape[0], out = qweight.shape[1] * 8;
  if (in % q.group_size != 0) {
    parts.fail("qweight", "has an input width of " + std::to_string(in) + ", which the group size " +
                              std::to_string(q.group_size) + " does not divide");
  }
  const int64_t groups = in / q.group_size;
  parts.expect_shape("qzeros", {groups, out / 8}, "in / group_size, out / 8");
  parts.expect_shape("scales", {groups, out}, "in / group_size, out");
  const std::vector<uint32_t> words = parts.words("qweight"), zeros = parts.words("qzeros");
  const std::vector<float> scales = parts.floats("scales");
  return int_codes_tensor(parts.name("qweight"),
                          awq_codes(in, out, q.group_size, words.data(), zeros.data(), scales.data()));
}

}  // namespace cbatch
