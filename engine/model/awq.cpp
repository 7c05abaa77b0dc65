// AWQ GEMM unpacking (awq.hpp).
#include "engine/model/awq.hpp"

namespace cbatch {

void awq_dequantize(int64_t in, int64_t out, int64_t group_size, const uint32_t* qweight, const uint32_t* qzeros,
                    const float* scales, float* w) {
  const int64_t words = out / 8;
  for (int64_t k = 0; k < in; ++k) {
    const int64_t g = k / group_size;
    for (int64_t c = 0; c < words; ++c) {
      const uint32_t codes = qweight[k * words + c], zeros = qzeros[g * words + c];
      for (int nibble = 0; nibble < 8; ++nibble) {
        const int64_t o = c * 8 + kAwqNibbleColumn[nibble];
        const int code = static_cast<int>((codes >> (4 * nibble)) & 0xF);
        const int zero = static_cast<int>((zeros >> (4 * nibble)) & 0xF);
        w[o * in + k] = scales[g * out + o] * static_cast<float>(code - zero);
      }
    }
  }
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
  std::vector<float> w(static_cast<size_t>(out * in));
  awq_dequantize(in, out, q.group_size, words.data(), zeros.data(), scales.data(), w.data());
  return owned_f32(parts.name("qweight"), out, in, std::move(w));
}

}  // namespace cbatch
