#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu_matmul.hpp"
#include "engine/thread_pool.hpp"

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

TEST_CASE("matmul is batch-invariant: a row's result does not depend on M, its position or threads") {
  ThreadPool pool(2);
  for (int k : {16, 64, 172, 576}) {
    const int n = 37, max_m = 23;
    const auto w = random_vector(static_cast<size_t>(n) * k, 1);
    const auto x = random_vector(static_cast<size_t>(max_m) * k, 2);
    std::vector<float> single(static_cast<size_t>(max_m) * n);
    for (int i = 0; i < max_m; ++i) matmul_ref(&x[static_cast<size_t>(i) * k], w.data(), &single[static_cast<size_t>(i) * n], 1, n, k);
    for (int m = 1; m <= max_m; ++m) {
      for (int offset : {0, max_m - m}) {
        std::vector<float> y(static_cast<size_t>(m) * n, NAN);
        matmul(&x[static_cast<size_t>(offset) * k], w.data(), y.data(), m, n, k, pool);
        CHECK(std::memcmp(y.data(), &single[static_cast<size_t>(offset) * n], y.size() * sizeof(float)) == 0);
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
  matmul(x.data(), w.data(), y.data(), m, n, k, pool);
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
