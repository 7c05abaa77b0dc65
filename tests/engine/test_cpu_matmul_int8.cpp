// The 8-bit integer matmul (--cpu-precision fast): activation quantization, each kernel (AVX-512 VNNI,
// AVX2, where this CPU runs them) against the scalar reference bit for bit on every block type, batch
// invariance through matmul(), and agreement with the exact fp32 product and with a double-precision sum
// over the quantized activations.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_matmul.hpp"
#include "engine/cpu/cpu_matmul_int8.hpp"
#include "test_blocks.hpp"

using namespace cbatch;
using namespace cbatch::matmul_detail;

namespace {

struct Case {
  DType dtype;
  int64_t n, k;
  std::vector<uint8_t> bytes;  // (n, k / block) GGUF blocks
  std::vector<float> w;        // (n, k) their fp32 values

  Case(DType type, int64_t rows, int64_t cols, unsigned seed)
      : dtype(type), n(rows), k(cols), bytes(testing::random_blocks(type, rows, cols, seed)),
        w(static_cast<size_t>(rows * cols)) {
    tensor_rows_to_f32(testing::blocks_view(bytes, dtype, n, k), 0, n, w.data());
  }
  PackedMatrix pack(ThreadPool& pool, bool int8, bool planes = false) const {
    return PackedMatrix(n, k, dtype, [&](int64_t row) { return bytes.data() + row * row_bytes(dtype, k); }, pool, int8,
                        planes);
  }
};

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(err / std::max(norm, 1e-300));
}

}  // namespace

TEST_CASE("quantize_rows_q8: each block (32 or 256 k) within half a step of its scale, sums of q per 16, "
          "ties to even, the bits of the scalar formula; 256-blocks' split sums give their 32-k sums") {
  const int64_t m = 3, k = 512;
  auto x = testing::random_activations(static_cast<size_t>(m * k), 7);
  for (int i = 256; i < 512; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero 256-block: d = 0, q = 0
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(96 + i)] = static_cast<float>(i % 8) - 3.5f;  // halves
  x[96 + 31] = 127.0f;  // d = 1 for the 32-block: the halves are ties, rounded to even
  for (int i = 0; i < 256; ++i) x[static_cast<size_t>(2 * k + i)] = -100.0f;  // 32-k sums of -4064
  for (int block : {32, 256}) {
    CAPTURE(block);
    Q8Rows q8;
    quantize_rows_q8(x.data(), m, k, block, q8);
    CHECK(q8.block == block);
    if (block == 32) {
      for (int i = 0; i < 8; ++i) CHECK(q8.q[static_cast<size_t>(96 + i)] == std::array{-4, -2, -2, 0, 0, 2, 2, 4}[i]);
    }
    for (int64_t b = 0; b < m * k / block; ++b) {
      const float d = q8.d[static_cast<size_t>(b)];
      float amax = 0.0f;
      for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(b * block + i)]));
      CHECK(d == amax / 127.0f);
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      std::vector<int32_t> sums(static_cast<size_t>(block / 16), 0);
      int max_q = 0;
      for (int i = 0; i < block; ++i) {
        const float xi = x[static_cast<size_t>(b * block + i)];
        const int q = q8.q[static_cast<size_t>(b * block + i)];
        CHECK(q == static_cast<int>(std::clamp(std::nearbyint(xi * id), -127.0f, 127.0f)));
        sums[static_cast<size_t>(i / 16)] += q;
        max_q = std::max(max_q, std::abs(q));
        CHECK(std::fabs(xi - d * static_cast<float>(q)) <= 0.5001f * d);
      }
      for (int j = 0; j < block / 16; ++j) {
        CHECK(sums[static_cast<size_t>(j)] == q8.sums[static_cast<size_t>(b * block / 16 + j)]);
      }
      CHECK(max_q == (d == 0.0f ? 0 : 127));
      if (block != 256) continue;
      int8_t split[16];
      std::memcpy(split, &q8.split_sums[static_cast<size_t>(4 * b)], sizeof(split));
      for (int j = 0; j < 8; ++j) {
        CHECK(split[8 + j] >= 0);
        CHECK(128 * split[j] + split[8 + j] == sums[static_cast<size_t>(2 * j)] + sums[static_cast<size_t>(2 * j + 1)]);
      }
    }
    CHECK(q8.d[static_cast<size_t>(256 / block)] == 0.0f);
  }
  Q8Rows q8;
  quantize_rows_q8(x.data(), m, k, 256, q8);
  CHECK(q8.sums[2 * k / 16] + q8.sums[2 * k / 16 + 1] == -4064);  // the extreme 32-k sum, split exactly above
}

TEST_CASE("int8 kernels: every instruction set this CPU runs gives the scalar reference's bits, every block type "
          "(5- and 6-bit ones in bytes and in planes), several rows per call or one") {
  ThreadPool pool(2);
  const int64_t m = 7;  // one 4-row VNNI tile and a 3-row edge
  std::vector<std::pair<DType, bool>> variants;  // (type, planes)
  for (DType dtype : testing::kBlockTypes) {
    variants.emplace_back(dtype, false);
    if (has_int8_planes(dtype)) variants.emplace_back(dtype, true);
  }
  for (const auto& variant : variants) {
    const DType dtype = variant.first;  // not structured bindings: CAPTURE's lambdas take these
    const bool planes = variant.second;
    const int64_t block = dtype_block_elems(dtype);
    for (int64_t k : {block, 3 * block}) {
      for (int64_t n : {int64_t{37}, int64_t{20}, int64_t{5}}) {  // 3, 2 and 1 panels, the last partial
        CAPTURE(dtype_name(dtype));
        CAPTURE(planes);
        CAPTURE(k);
        CAPTURE(n);
        const Case c(dtype, n, k, static_cast<unsigned>(k + n));
        const PackedMatrix w = c.pack(pool, true, planes);
        REQUIRE(w.is_int8());
        REQUIRE(w.has_planes() == planes);
        const auto x = testing::random_activations(static_cast<size_t>(m * k), 3);
        Q8Rows q8;
        quantize_rows_q8(x.data(), m, k, q8_block(dtype), q8);
        const int64_t panels = (n + matmul_panel_width() - 1) / matmul_panel_width();
        std::vector<float> want(static_cast<size_t>(m * n), NAN);
        matmul_int8_panels(Int8Isa::kScalar, dtype, planes, q8, 0, m, w.blocked_panel(0), w.panel_bytes(), 0, panels,
                           want.data(), n, n);
        for (Int8Isa isa : {Int8Isa::kAvx2, Int8Isa::kAvx512Vnni}) {
          if (!can_run(isa)) {
            MESSAGE("this CPU cannot run the " << int8_isa_name(isa) << " kernel: not checked");
            continue;
          }
          CAPTURE(int8_isa_name(isa));
          std::vector<float> got(want.size(), NAN);
          matmul_int8_panels(isa, dtype, planes, q8, 0, m, w.blocked_panel(0), w.panel_bytes(), 0, panels, got.data(), n,
                             n);
          CHECK(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)) == 0);
          std::vector<float> one_by_one(want.size(), NAN);  // one row per call: the decode kernels
          for (int64_t i = 0; i < m; ++i) {
            matmul_int8_panels(isa, dtype, planes, q8, i, i + 1, w.blocked_panel(0), w.panel_bytes(), 0, panels,
                               one_by_one.data(), n, n);
          }
          CHECK(std::memcmp(want.data(), one_by_one.data(), one_by_one.size() * sizeof(float)) == 0);
        }
        // The reference itself against a double-precision sum of the dequantized activations times the
        // exact weights: only fp32 rounding apart (a wrong scale, offset or code order is far off).
        std::vector<double> sum(want.size(), 0.0);
        const int64_t block_k = q8.block;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t p = 0; p < k; ++p)
              sum[static_cast<size_t>(i * n + j)] +=
                  static_cast<double>(q8.d[static_cast<size_t>((i * k + p) / block_k)]) *
                  q8.q[static_cast<size_t>(i * k + p)] * c.w[static_cast<size_t>(j * k + p)];
        CHECK(relative_error(want, sum) < 1e-5);
      }
    }
  }
}

TEST_CASE("int8 planes: the 5- and 6-bit types' planes give the whole-byte panels' bits in fewer bytes") {
  ThreadPool pool(2);
  // Bits a weight in bytes and in planes (a superblock's header included).
  const std::array<std::tuple<DType, double, double>, 4> types = {
      {{DType::kQ5_0, 8.5, 5.5}, {DType::kQ5_1, 9.0, 6.0}, {DType::kQ5_K, 8.625, 5.625}, {DType::kQ6_K, 8.625, 6.625}}};
  for (const auto& type : types) {
    const DType dtype = std::get<0>(type);
    const double byte_bits = std::get<1>(type), plane_bits = std::get<2>(type);
    CAPTURE(dtype_name(dtype));
    REQUIRE(has_int8_planes(dtype));
    const int64_t n = 40, k = 512;
    const Case c(dtype, n, k, 11);
    const PackedMatrix bytes = c.pack(pool, true), planes = c.pack(pool, true, true);
    CHECK_FALSE(bytes.has_planes());
    CHECK(planes.has_planes());
    const double weights = static_cast<double>((n + matmul_panel_width() - 1) / matmul_panel_width() *
                                               matmul_panel_width() * k);  // whole panels
    CHECK(static_cast<double>(bytes.bytes()) * 8 / weights == byte_bits);
    CHECK(static_cast<double>(planes.bytes()) * 8 / weights == plane_bits);
    for (int64_t m : {1, 2, 7}) {  // the one-row kernel, and the tiles
      CAPTURE(m);
      const auto x = testing::random_activations(static_cast<size_t>(m * k), 5);
      std::vector<float> want(static_cast<size_t>(m * n), NAN), got(want.size(), NAN);
      matmul(x.data(), bytes, want.data(), m, pool);
      matmul(x.data(), planes, got.data(), m, pool);
      CHECK(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)) == 0);
    }
  }
  for (DType dtype : {DType::kQ4_K, DType::kQ8_0, DType::kIQ4_NL}) {  // no planes: the flag changes nothing
    CAPTURE(dtype_name(dtype));
    CHECK_FALSE(has_int8_planes(dtype));
    CHECK_FALSE(Case(dtype, 16, 256, 1).pack(pool, true, true).has_planes());
  }
}

TEST_CASE("int8 matmul is batch-invariant (every row the bits of the same row alone) and within 2% of the exact product") {
  ThreadPool pool(2);
  for (DType dtype :
       {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL}) {
    const int64_t k = dtype_block_elems(dtype) == 32 ? 576 : 1024, max_m = 19;
    const int64_t n = 1000;  // 63 panels: split across the pool's threads
    CAPTURE(dtype_name(dtype));
    const Case c(dtype, n, k, 11);
    const PackedMatrix fast = c.pack(pool, true), exact = c.pack(pool, false);
    const auto x = testing::random_activations(static_cast<size_t>(max_m * k), 5);
    std::vector<float> alone(static_cast<size_t>(max_m * n), NAN);
    for (int64_t i = 0; i < max_m; ++i) matmul(&x[static_cast<size_t>(i * k)], fast, &alone[static_cast<size_t>(i * n)], 1, pool);
    for (int64_t m : {int64_t{2}, int64_t{5}, int64_t{13}}) {
      for (int64_t offset : {int64_t{0}, max_m - m}) {
        std::vector<float> y(static_cast<size_t>(m * n), NAN);
        matmul(&x[static_cast<size_t>(offset * k)], fast, y.data(), m, pool);
        CHECK(std::memcmp(y.data(), &alone[static_cast<size_t>(offset * n)], y.size() * sizeof(float)) == 0);
      }
    }
    std::vector<float> y_exact(alone.size(), NAN);
    matmul(x.data(), exact, y_exact.data(), max_m, pool);
    const double err = relative_error(alone, std::vector<double>(y_exact.begin(), y_exact.end()));
    MESSAGE(dtype_name(dtype) << ": int8 vs exact fp32, normwise relative error " << err);
    // 8-bit activations: 1.1-1.3% here per 32 k, 2.9-3.0% per 256 k (the K-quants': a 30x outlier in a block
    // coarsens its step, and nearly every 256-block holds two or three)
    CHECK(err < (q8_block(dtype) == 32 ? 0.02 : 0.04));
    CHECK(err > 0.0);   // it is a different product
  }
}

TEST_CASE("int8 parts of different block types stacked by rows give each part's own product in its columns; "
          "parts whose activation blocks differ are refused") {
  ThreadPool pool(2);
  const int64_t k = 256, width = matmul_panel_width();
  // Gemma 3's Q5_0 Q and K with a Q8_0 V (32-blocks); a Q4_K_M file's Q4_K Q and K with a Q6_K V (256).
  for (const auto& types : {std::pair{DType::kQ5_0, DType::kQ8_0}, std::pair{DType::kQ4_K, DType::kQ6_K}}) {
    const DType first_type = types.first, last_type = types.second;  // (clang captures no structured binding)
    CAPTURE(dtype_name(first_type));
    const Case q(first_type, 2 * width, k, 1), v(last_type, 20, k, 2), d(first_type, 3 * width, k, 3);
    std::vector<PackedMatrix> parts;
    for (const Case* c : {&q, &d, &v}) parts.push_back(c->pack(pool, true));
    const PackedMatrix stacked(std::move(parts));
    const int64_t n = stacked.rows();
    CHECK(n == 5 * width + 20);
    for (int64_t m : {int64_t{1}, int64_t{6}}) {
      const auto x = testing::random_activations(static_cast<size_t>(m * k), 9);
      std::vector<float> y(static_cast<size_t>(m * n), NAN);
      matmul(x.data(), stacked, y.data(), m, pool);
      int64_t first = 0;
      for (const Case* c : {&q, &d, &v}) {
        std::vector<float> alone(static_cast<size_t>(m * c->n), NAN);
        matmul(x.data(), c->pack(pool, true), alone.data(), m, pool);
        for (int64_t i = 0; i < m; ++i) {
          CHECK(std::memcmp(&y[static_cast<size_t>(i * n + first)], &alone[static_cast<size_t>(i * c->n)],
                            static_cast<size_t>(c->n) * sizeof(float)) == 0);
        }
        first += c->n;
      }
    }
  }
  std::vector<PackedMatrix> mixed;
  mixed.push_back(Case(DType::kQ5_0, width, k, 4).pack(pool, true));
  mixed.push_back(Case(DType::kQ4_K, width, k, 5).pack(pool, true));
  CHECK_THROWS_WITH(PackedMatrix(std::move(mixed)), doctest::Contains("activation block"));
}
