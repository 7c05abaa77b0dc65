// GPTQ unpacking (gptq.hpp): the shapes of qzeros, scales and g_idx follow from qweight's and the config's
// group size; g_idx must give every group exactly group_size input rows (checked_groups).
#include "engine/model/gptq.hpp"

#include <algorithm>

#include "engine/base/error.hpp"

namespace cbatch {
namespace {

// g_idx, or k / group_size when the file has none.
std::vector<int32_t> group_of_rows(const QuantizedParts& parts, const GptqShape& s, int64_t group_rows) {
  if (parts.has("g_idx")) return checked_groups(parts, "g_idx", s.in, s.num_groups, group_rows);
  std::vector<int32_t> g(static_cast<size_t>(s.in));
  for (int64_t k = 0; k < s.in; ++k) g[static_cast<size_t>(k)] = static_cast<int32_t>(k / group_rows);
  return g;
}

}  // namespace

IntCodes gptq_codes(const GptqShape& s, const uint32_t* qweight, const uint32_t* qzeros, const float* scales,
                    const int32_t* g_idx) {
  IntCodes c;
  c.out = s.out, c.in = s.in, c.num_groups = s.num_groups;
  c.codes.resize(static_cast<size_t>(s.out * s.in));
  c.scales.resize(static_cast<size_t>(s.out * s.num_groups));
  c.zeros.resize(c.scales.size());
  c.groups.assign(g_idx, g_idx + s.in);
  const int per_word = 32 / s.bits;
  const uint32_t mask = (1u << s.bits) - 1;
  const int64_t zero_words = s.out / per_word;
  for (int64_t k = 0; k < s.in; ++k) {
    const int shift = static_cast<int>(k % per_word) * s.bits;
    const uint32_t* row = qweight + (k / per_word) * s.out;
    const int64_t g = g_idx[k];
    for (int64_t o = 0; o < s.out; ++o) {
      const uint32_t zero_word = qzeros[g * zero_words + o / per_word];
      const int zero = static_cast<int>((zero_word >> ((o % per_word) * s.bits)) & mask) + s.zero_offset;
      const int code = static_cast<int>((row[o] >> shift) & mask);
      c.codes[static_cast<size_t>(o * s.in + k)] = static_cast<int16_t>(code - zero);
      c.zeros[static_cast<size_t>(o * s.num_groups + g)] = static_cast<int16_t>(zero);
    }
  }
  for (int64_t g = 0; g < s.num_groups; ++g) {
    for (int64_t o = 0; o < s.out; ++o) c.scales[static_cast<size_t>(o * s.num_groups + g)] = scales[g * s.out + o];
  }
  return c;
}

void gptq_dequantize(const GptqShape& s, const uint32_t* qweight, const uint32_t* qzeros, const float* scales,
                     const int32_t* g_idx, float* w) {
  const std::vector<float> values = int_codes_dequantize(gptq_codes(s, qweight, qzeros, scales, g_idx));
  std::copy(values.begin(), values.end(), w);
}

OwnedTensor read_gptq(const TensorFileOf& file_of, const std::string& weight_name, const QuantizationConfig& q) {
  const QuantizedParts parts(file_of, weight_name, "GPTQ");
  const SafetensorsTensor& qweight = parts.entry("qweight", "I32");
  GptqShape s;
  s.bits = q.bits;
  s.zero_offset = q.format == "gptq_v2" ? 0 : 1;
  const int per_word = 32 / s.bits;
  if (qweight.shape.size() != 2 || qweight.shape[0] == 0 || qweight.shape[1] % per_word != 0) {
    parts.fail("qweight", "has shape " + shape_list(qweight.shape) + ", expected [in * " + std::to_string(q.bits) +
                              " / 32, out] with out a multiple of " + std::to_string(per_word));
  }
  s.in = qweight.shape[0] * per_word;
  s.out = qweight.shape[1];
  const int64_t group_rows = q.group_size == -1 ? s.in : q.group_size;
  if (s.in % group_rows != 0) {
    parts.fail("qweight", "has an input width of " + std::to_string(s.in) + ", which the group size " +
                              std::to_string(group_rows) + " does not divide");
  }
  s.num_groups = s.in / group_rows;
  parts.expect_shape("qzeros", {s.num_groups, s.out / per_word}, "groups, out * bits / 32");
  parts.expect_shape("scales", {s.num_groups, s.out}, "groups, out");
  const std::vector<int32_t> g_idx = group_of_rows(parts, s, group_rows);
  const std::vector<uint32_t> words = parts.words("qweight"), zeros = parts.words("qzeros");
  const std::vector<float> scales = parts.floats("scales");
  return int_codes_tensor(parts.name("qweight"),
                          gptq_codes(s, words.data(), zeros.data(), scales.data(), g_idx.data()));
}

}  // namespace cbatch
