#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <utility>
#include <vector>

#include "engine/cpu/cpu_matmul.hpp"
#include "engine/base/thread_pool.hpp"
#include "test_blocks.hpp"

using namespace cbatch;

namespace {
std::vector<float> random_vector(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}
}  // namespace

PackedMatrix pack(const std::vector<float>& w, int64_t n, int64_t k, ThreadPool& pool) {
  return PackedMatrix(n, k, [&](int64_t row, int64_t count, float* out) {
    std::memcpy(out, &w[static_cast<size_t>(row * k)], static_cast<size_t>(count * k) * sizeof(float));
  }, pool);
}

TEST_CASE("matmul is batch-invariant: every row equals the fma-chain reference, whatever M, offset or threads") {
  ThreadPool pool(2);
  for (int k : {16, 64, 172, 576}) {
    for (int n : {37, 64, 5}) {  // a partial last panel, whole panels, fewer columns than one panel
      const int max_m = 23;
      const auto w = random_vector(static_cast<size_t>(n) * k, 1);
      const auto x = random_vector(static_cast<size_t>(max_m) * k, 2);
      const PackedMatrix packed = pack(w, n, k, pool);
      std::vector<float> ref(static_cast<size_t>(max_m) * n);
      matmul_ref(x.data(), w.data(), ref.data(), max_m, n, k);
      for (int m = 1; m <= max_m; ++m) {
        for (int offset : {0, max_m - m}) {
          std::vector<float> y(static_cast<size_t>(m) * n, NAN);
          matmul(&x[static_cast<size_t>(offset) * k], packed, y.data(), m, pool);
          CHECK(std::memcmp(y.data(), &ref[static_cast<size_t>(offset) * n], y.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("matmul agrees with a double-precision reference") {
  ThreadPool pool(2);
  const int m = 9, n = 130, k = 300;
  const auto w = random_vector(static_cast<size_t>(n) * k, 3);
  const auto x = random_vector(static_cast<size_t>(m) * k, 4);
  std::vector<float> y(static_cast<size_t>(m) * n, NAN);
  matmul(x.data(), pack(w, n, k, pool), y.data(), m, pool);
  double err = 0, ref_norm = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0;
      for (int p = 0; p < k; ++p) ref += static_cast<double>(x[i * k + p]) * w[j * k + p];
      err += (y[i * n + j] - ref) * (y[i * n + j] - ref);
      ref_norm += ref * ref;
    }
  }
  CHECK(std::sqrt(err / ref_norm) < 1e-6);
}

TEST_CASE("weights kept in blocks of every type give the bits of their fp32 expansion, whatever M") {
  ThreadPool pool(2);
  std::vector<DType> dtypes(std::begin(testing::kBlockTypes), std::end(testing::kBlockTypes));
  dtypes.push_back(DType::kFP8);  // fp32 products only: the 8-bit path takes it as Q8_0
  for (DType dtype : dtypes) {
    const int block = static_cast<int>(dtype_block_elems(dtype));
    for (int k : {block, 3 * block, block == 32 ? 576 : 1024}) {
      for (int n : {37, 64, 5}) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(k);
        CAPTURE(n);
        REQUIRE(PackedMatrix::keeps_blocks(dtype, k));
        const auto bytes = testing::random_blocks(dtype, n, k, static_cast<unsigned>(k * 100 + n));
        const TensorView view = testing::blocks_view(bytes, dtype, n, k);
        std::vector<float> w(static_cast<size_t>(n) * k);
        tensor_rows_to_f32(view, 0, n, w.data());
        const PackedMatrix dense = pack(w, n, k, pool);
        const PackedMatrix blocked(n, k, dtype, [&](int64_t row) { return bytes.data() + row * row_bytes(dtype, k); }, pool);
        CHECK(blocked.is_blocked());
        CHECK(blocked.bytes() * 3 < dense.bytes());  // 5 to 10 bits a weight, fp32: 32
        const int panels = (n + matmul_panel_width() - 1) / matmul_panel_width();
        std::vector<float> a(static_cast<size_t>(panels) * k * matmul_panel_width()), b(a.size());
        dense.unpack_panels(0, panels, a.data());
        blocked.unpack_panels(0, panels, b.data());
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);  // padding lanes +0 too
        // The one-row fused tile, unpacked panels (tile edges of 3 and 37 rows), more than one row block.
        for (int m : {1, 2, 3, 37, 130}) {
          const auto x = random_vector(static_cast<size_t>(m) * k, 5);
          std::vector<float> want(static_cast<size_t>(m) * n), got(want.size(), NAN);
          matmul_ref(x.data(), w.data(), want.data(), m, n, k);
          matmul(x.data(), blocked, got.data(), m, pool);
          CHECK(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)) == 0);
        }
      }
    }
  }
  CHECK_FALSE(PackedMatrix::keeps_blocks(DType::kF16, 64));
  CHECK_FALSE(PackedMatrix::keeps_blocks(DType::kQ4_1, 48));
  CHECK_FALSE(PackedMatrix::keeps_blocks(DType::kQ4_K, 288));  // 9 blocks of 32, not whole super-blocks
}

TEST_CASE("a blocked Q4_K matrix holds 0.75 bytes a weight, a Q6_K or Q5_0 one at most 1.25, MXFP4 0.625") {
  ThreadPool pool(1);
  const int n = 4 * matmul_panel_width(), k = 1024;
  for (const auto& entry : {std::pair{DType::kQ4_K, 0.75}, std::pair{DType::kQ6_K, 1.25},
                            std::pair{DType::kQ5_0, 1.125}, std::pair{DType::kIQ4_XS, 0.625},
                            std::pair{DType::kMXFP4, 0.625}}) {
    const DType dtype = entry.first;  // no structured binding: clang 14 cannot capture one in a lambda
    const double bytes_per_weight = entry.second;
    const auto bytes = testing::random_blocks(dtype, n, k, 1);
    const PackedMatrix blocked(n, k, dtype, [&](int64_t row) { return bytes.data() + row * row_bytes(dtype, k); }, pool);
    CAPTURE(dtype_name(dtype));
    CHECK(static_cast<double>(blocked.bytes()) / (static_cast<double>(n) * k) == bytes_per_weight);
  }
}

TEST_CASE("thread pool covers the range exactly once with aligned chunks") {
  ThreadPool pool(3);
  for (int64_t n : {1, 5, 64, 1001}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      CHECK(b % 4 == 0);
      for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
    }, 4, 1);
    for (int h : hits) CHECK(h == 1);
  }
}
