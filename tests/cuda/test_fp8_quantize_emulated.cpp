// The block code of per-tensor FP8 quantization (fp8_quantize_block.cuh) run on the CPU by the block
// emulator, several blocks of a grid-stride grid (16-byte packs and the element-by-element path for an
// unaligned start or the tail), against a host reference written from the definition:
// scale = max |x| / 448 (1 for all zeros), codes = fp8.hpp's E4M3(x / scale). Also: values beyond
// 448 * scale saturate to +-448 (never NaN codes), zeros, and a NaN or infinity counts as an infinite
// amax (the weight upload refuses such tensors). Part of the host suite.
#include <math.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/model/fp8.hpp"
#include "tests/cuda/test_util.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the device code after it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "tests/cuda/block_emulator.hpp"
#include "cuda/common/cuda_dtype.cuh"
#include "cuda/gemm/fp8_quantize_block.cuh"

namespace cbatch::test {
namespace {

using fp8_detail::kFp8Threads;

// The emulated kernels' results: one partial maximum a block, the scale and the codes.
struct Quantized {
  std::vector<float> partials;
  float scale = NAN;
  std::vector<uint8_t> codes;
};

// The amax pass over x[skip..) (skip 1: not 16-byte aligned, so element by element).
template <typename T>
std::vector<float> emulated_amax(const std::vector<T>& x, unsigned grid, size_t skip = 0) {
  std::vector<float> partials(grid, NAN);
  block_emulator::launch(grid, kFp8Threads, [&] {
    fp8_detail::fp8_amax_block<T>(x.data() + skip, x.size() - skip, partials.data());
  });
  return partials;
}

// The quantize pass over x[skip..) on given partial maxima (the amax pass's, or planted ones).
template <typename T>
Quantized emulated_quantize(const std::vector<T>& x, unsigned grid, std::vector<float> partials, size_t skip = 0) {
  Quantized q;
  q.partials = std::move(partials);
  q.codes.assign(x.size() - skip, 0x7F);  // NaN codes: an element left unwritten fails the comparison
  block_emulator::launch(grid, kFp8Threads, [&] {
    fp8_detail::fp8_quantize_block<T>(q.codes.data(), &q.scale, x.data() + skip, x.size() - skip,
                                      q.partials.data(), static_cast<int>(q.partials.size()));
  });
  return q;
}

// The reference of a whole tensor x (already in T's values): scale and codes from the definition.
void check_against_reference(const std::vector<float>& x, const Quantized& q) {
  double amax = 0.0;
  for (float v : x) amax = std::fmax(amax, std::fabs(static_cast<double>(v)));
  const float scale = amax > 0.0 ? static_cast<float>(amax) / 448.0f : 1.0f;
  REQUIRE(q.scale == scale);
  int mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) mismatches += q.codes[i] != fp8_e4m3_from_float(x[i] / scale);
  CHECK(mismatches == 0);
  // What the codes mean: within E4M3's half step (2^-4 relative) of x for normal codes, 2^-10 * scale
  // absolutely for subnormal ones; the largest magnitude lands on 448.
  double worst = 0.0;
  bool hit_max = false;
  for (size_t i = 0; i < x.size(); ++i) {
    const double back = static_cast<double>(fp8_e4m3_to_float(q.codes[i])) * scale;
    const double bound = std::fmax(std::fabs(x[i]) / 16.0, scale / 1024.0) * 1.0001;
    worst = std::fmax(worst, std::fabs(back - x[i]) / bound);
    hit_max = hit_max || (std::fabs(x[i]) == amax && (q.codes[i] & 0x7Fu) == 0x7Eu);
  }
  CHECK(worst <= 1.0);
  CHECK(hit_max);
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE_TEMPLATE("fp8 quantization block code equals the host reference (emulated)", T, float, __nv_bfloat16,
                     __half) {
    // 3 blocks of 256 threads, each thread 2 or more 16-byte packs, then 37 elements past the last whole
    // pack; once from an aligned start (packs) and once from x[1] (element by element). The largest
    // value is near the end.
    const unsigned grid = 3;
    std::vector<float> x = random_vector(grid * 16 * kFp8Threads + 37, 91, -3.0f, 3.0f);
    const size_t at_max = x.size() - 5;
    x[at_max] = -7.25f;  // amax, negative: the code is 0xFE
    x[10] = 0.0f;
    x[11] = -0.0f;
    x[12] = 1e-4f;  // a subnormal code at this scale
    x = round_to<T>(x);
    const std::vector<T> xt = to_t<T>(x);
    for (size_t skip : {size_t{0}, size_t{1}}) {
      CAPTURE(skip);
      const std::vector<float> partials = emulated_amax(xt, grid, skip);
      CHECK(std::count(partials.begin(), partials.end(), 7.25f) == 1);  // one block saw it, every block ran
      CHECK(*std::min_element(partials.begin(), partials.end()) > 2.5f);
      const Quantized q = emulated_quantize(xt, grid, partials, skip);
      check_against_reference(std::vector<float>(x.begin() + static_cast<long>(skip), x.end()), q);
      CHECK(q.codes[at_max - skip] == 0xFEu);
      CHECK(q.codes[10 - skip] == 0x00u);
      CHECK(q.codes[11 - skip] == 0x80u);
    }
  }

  TEST_CASE("fp8 quantization saturates values beyond 448 * scale to +-448 (emulated)") {
    // The scale comes from planted partials (amax 1) while x reaches 10: every |x| > 1 saturates.
    const std::vector<float> x = random_vector(2000, 92, -10.0f, 10.0f);
    const Quantized q = emulated_quantize(x, 2, {1.0f, 0.5f});
    REQUIRE(q.scale == 1.0f / 448.0f);
    int saturated = 0, wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) <= 1.0f) continue;
      ++saturated;
      wrong += q.codes[i] != (x[i] > 0 ? 0x7Eu : 0xFEu);
    }
    CHECK(saturated > 1500);
    CHECK(wrong == 0);
  }

  TEST_CASE("fp8 quantization of zeros: scale 1, codes 0; an empty tensor still writes the scale (emulated)") {
    const std::vector<float> zeros(1500, 0.0f);
    const Quantized q = emulated_quantize(zeros, 2, emulated_amax(zeros, 2));
    CHECK(q.scale == 1.0f);
    CHECK(std::count(q.codes.begin(), q.codes.end(), uint8_t{0}) == 1500);
    const std::vector<float> empty;
    const Quantized e = emulated_quantize(empty, 1, emulated_amax(empty, 1));
    CHECK(e.partials[0] == 0.0f);
    CHECK(e.scale == 1.0f);
  }

  TEST_CASE_TEMPLATE("fp8 amax counts a NaN or an infinity as infinite (emulated)", T, float, __nv_bfloat16, __half) {
    for (float bad : {NAN, -NAN, INFINITY, -INFINITY}) {
      for (size_t at : {size_t{0}, size_t{700}, size_t{1999}}) {
        CAPTURE(bad);
        CAPTURE(at);
        std::vector<float> x = random_vector(2000, 93, -1.0f, 1.0f);
        x[at] = bad;
        const std::vector<float> partials = emulated_amax(to_t<T>(x), 2);
        CHECK(std::isinf(std::max(partials[0], partials[1])));
        CHECK(std::isfinite(std::min(partials[0], partials[1])));
      }
    }
  }
}

}  // namespace cbatch::test
