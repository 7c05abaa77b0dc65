// MXFP4 (OCP microscaling FP4; quant_blocks.hpp, mxfp4_hf.hpp): every E2M1 code at E8M0 scales from both
// ends decodes to its value computed here from the format's definition (sign, 2 exponent bits with bias 1,
// 1 mantissa bit; scale 2^(e - 127)), in ggml's nibble order (element e in byte 1 + e % 16, the high nibble
// from 16 on), one block and element by element alike; Hugging Face blocks + scales pairs become the same
// tensor, and malformed pairs are errors naming the tensor. (The gguf package's values and the CPU matmul:
// tests/e2e/test_quant_types.py; the matmul on random MXFP4 blocks: test_cpu_matmul.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/mxfp4_hf.hpp"
#include "engine/model/quant_blocks.hpp"
#include "test_blocks.hpp"
#include "test_files.hpp"

namespace cbatch {
namespace {

using test::error_of;

// The E2M1 value of a 4-bit code, from the format's definition.
double e2m1(int code) {
  const int exponent = (code >> 1) & 3, mantissa = code & 1;
  const double magnitude = exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
  return code & 8 ? -magnitude : magnitude;
}

// The weight of code with scale byte e, as fp32: ggml reads -0 (code 8) as +0 and e = 255 (NaN in the OCP
// format) as 2^128.
float mxfp4_weight(int code, int e) {
  const float w = static_cast<float>(std::ldexp(e2m1(code), e - 127));  // exact, or out of fp32's range: inf
  return w == 0.0f ? 0.0f : w;
}

std::vector<float> decode(const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  tensor_rows_to_f32(testing::blocks_view(bytes, DType::kMXFP4, rows, cols), 0, rows, out.data());
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace

TEST_CASE("MXFP4 blocks: every code at scales from both ends, in ggml's nibble order") {
  CHECK(dtype_block_elems(DType::kMXFP4) == 32);
  CHECK(dtype_block_bytes(DType::kMXFP4) == 17);
  CHECK(std::string(dtype_name(DType::kMXFP4)) == "mxfp4");
  for (int code = 0; code < 16; ++code) CHECK(mxfp4_value(code) == 2 * e2m1(code));
  std::mt19937 rng(3);
  for (int e : {0, 1, 2, 100, 126, 127, 128, 129, 200, 253, 254, 255}) {
    // Element e2 holds code (e2 + shift) % 16: each code once among the low nibbles and once among the high.
    const int shift = static_cast<int>(rng() % 16);
    std::vector<uint8_t> block(17, 0);
    block[0] = static_cast<uint8_t>(e);
    for (int el = 0; el < 32; ++el) block[1 + el % 16] |= static_cast<uint8_t>(((el + shift) % 16) << (4 * (el / 16)));
    const std::vector<float> got = decode(block, 1, 32);
    int wrong = 0;
    for (int el = 0; el < 32; ++el) {
      const float want = mxfp4_weight((el + shift) % 16, e);
      wrong += !same_bits(got[el], want);
      wrong += !same_bits(block_element<BlockFormat<DType::kMXFP4>>(block.data(), el), want);
    }
    CAPTURE(e);
    CHECK(wrong == 0);
  }
  // The ends, spelled out: the smallest scale's smallest weight is the fp32 subnormal 2^-128, the largest
  // scale overflows from code 2 (1.0 * 2^128) on, and -0 reads as +0.
  std::vector<uint8_t> block(17, 0);
  block[1] = 0x91;  // element 0: code 1 (0.5), element 16: code 9 (-0.5)
  block[2] = 0x28;  // element 1: code 8 (-0), element 17: code 2 (1.0)
  std::vector<float> got = decode(block, 1, 32);
  CHECK(got[0] == std::ldexp(1.0f, -128));
  CHECK(got[16] == -std::ldexp(1.0f, -128));
  CHECK_FALSE(std::signbit(got[1]));
  CHECK(got[17] == std::ldexp(1.0f, -127));
  block[0] = 255;
  got = decode(block, 1, 32);
  CHECK(got[0] == std::ldexp(1.0f, 127));
  CHECK(got[16] == -std::ldexp(1.0f, 127));
  CHECK(std::isinf(got[17]));
}

namespace {

// A safetensors file of U8 (or other) tensors: name, dtype, shape, bytes.
struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

std::string safetensors_bytes(const std::vector<Entry>& entries) {
  std::string header = "{", data;
  for (const Entry& t : entries) {
    std::string shape;
    for (int64_t d : t.shape) {
      if (!shape.empty()) shape += ",";
      shape += std::to_string(d);
    }
    if (header.size() > 1) header += ", ";
    header += "\"" + t.name + "\": {\"dtype\": \"" + t.dtype +
              "\", \"shape\": [" + shape + "], \"data_offsets\": [" + std::to_string(data.size()) + ", " +
              std::to_string(data.size() + t.bytes.size()) + "]}";
    data.append(t.bytes.begin(), t.bytes.end());
  }
  header += "}";
  const uint64_t length = header.size();
  return std::string(reinterpret_cast<const char*>(&length), 8) + header + data;
}

}  // namespace

TEST_CASE("Hugging Face MXFP4 blocks and scales become ggml MXFP4 blocks of the same values") {
  // (experts 2, rows 3, 2 blocks of 16 bytes): a (6, 64) tensor. HF byte i of a block: element 2i low,
  // 2i + 1 high.
  const int experts = 2, rows = 3, blocks_per_row = 2, num_blocks = experts * rows * blocks_per_row;
  std::mt19937 rng(9);
  std::vector<int> codes(static_cast<size_t>(num_blocks) * 32);
  for (int& c : codes) c = static_cast<int>(rng() % 16);
  std::vector<uint8_t> hf_blocks(static_cast<size_t>(num_blocks) * 16, 0), scales(static_cast<size_t>(num_blocks));
  for (size_t i = 0; i < codes.size(); ++i) hf_blocks[i / 2] |= static_cast<uint8_t>(codes[i] << (4 * (i % 2)));
  for (uint8_t& s : scales) s = static_cast<uint8_t>(110 + rng() % 30);
  const std::string name = "model.layers.0.mlp.experts.gate_up_proj";
  const test::TempFile file(
      safetensors_bytes({{name + "_blocks", "U8", {experts, rows, blocks_per_row, 16}, hf_blocks},
                         {name + "_scales", "U8", {experts, rows, blocks_per_row}, scales},
                         {"bad_blocks", "U8", {6, 2, 17}, std::vector<uint8_t>(6 * 2 * 17)},
                         {"bad_scales", "U8", {6, 2}, scales},
                         {"short_blocks", "U8", {6, 2, 16}, hf_blocks},
                         {"short_scales", "U8", {6, 1}, std::vector<uint8_t>(6)},
                         {"wide_blocks", "F16", {6, 2, 8}, hf_blocks},
                         {"wide_scales", "U8", {6, 2}, scales}}),
      ".safetensors");
  const SafetensorsFile st(file.path());
  const OwnedTensor t = read_hf_mxfp4(st, st, name);
  CHECK(t.view.name == name);
  CHECK(t.view.dtype == DType::kMXFP4);
  CHECK(t.view.rows == experts * rows);
  CHECK(t.view.cols == blocks_per_row * 32);
  REQUIRE(t.bytes->size() == static_cast<size_t>(num_blocks) * 17);
  const std::vector<float> got = decode(*t.bytes, t.view.rows, t.view.cols);
  int wrong = 0;
  for (size_t i = 0; i < codes.size(); ++i) wrong += !same_bits(got[i], mxfp4_weight(codes[i], scales[i / 32]));
  CHECK(wrong == 0);

  // Malformed pairs: the message names the tensor and what is wrong.
  CHECK(error_of([&] { read_hf_mxfp4(st, st, "bad"); }).find("'bad_blocks' has shape [6, 2, 17]") != std::string::npos);
  CHECK(error_of([&] { read_hf_mxfp4(st, st, "short"); }).find("'short_scales' has shape [6, 1], expected [6, 2]") !=
        std::string::npos);
  CHECK(error_of([&] { read_hf_mxfp4(st, st, "wide"); }).find("'wide_blocks' has dtype F16") != std::string::npos);
  CHECK(error_of([&] { read_hf_mxfp4(st, st, "none"); }).find("'none_blocks' is missing") != std::string::npos);
}

}  // namespace cbatch
