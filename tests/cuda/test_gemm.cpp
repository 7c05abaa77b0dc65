// gemm (cuBLAS) against a double-precision reference: Y = X W^T for odd shapes, every input type, output
// in the input type or fp32. The fp32 tolerance (1e-5) also catches TF32 sneaking into fp32 GEMMs.
#include <doctest/doctest.h>

#include <vector>

#include "cuda/common/cuda_context.hpp"
#include "cuda/gemm/gemm.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

namespace {

template <typename T, typename TOut>
void check_gemm(const CudaContext& ctx, int m, int n, int k) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  const std::vector<float> x = round_to<T>(random_vector(static_cast<size_t>(m) * k, 71 + m));
  const std::vector<float> w = round_to<T>(random_vector(static_cast<size_t>(n) * k, 72 + n));
  auto d_x = to_device<T>(x);
  auto d_w = to_device<T>(w);
  DeviceBuffer<TOut> d_y(static_cast<size_t>(m) * n);
  poison(d_y);
  gemm<T, TOut>(ctx.cublas(), ctx.stream(), d_y.get(), d_x.get(), d_w.get(), m, n, k);
  ctx.synchronize();
  CHECK(rel_error(to_host(d_y), gemm_ref(x, w, m, n, k)) < tolerance<TOut>());
}

struct GemmShape {
  int m, n, k;
};
const GemmShape kShapes[] = {{1, 172, 64}, {7, 65, 172}, {33, 1000, 256}, {64, 512, 4096}, {130, 344, 172}};

}  // namespace

TEST_CASE_TEMPLATE("gemm computes X W^T", T, float, __nv_bfloat16, __half) {
  CudaContext ctx(0);
  for (const GemmShape& s : kShapes) check_gemm<T, T>(ctx, s.m, s.n, s.k);
}

TEST_CASE_TEMPLATE("gemm writes fp32 outputs for the logits", T, __nv_bfloat16, __half) {
  CudaContext ctx(0);
  for (const GemmShape& s : kShapes) {
    // fp32 output of 16-bit inputs: products are exact, but tensor cores accumulate in fp32 with
    // truncation, which over k = 4096 can reach ~1e-4; 1e-3 still catches any wrong layout or type.
    CAPTURE(type_name<T>());
    const std::vector<float> x = round_to<T>(random_vector(static_cast<size_t>(s.m) * s.k, 81 + s.m));
    const std::vector<float> w = round_to<T>(random_vector(static_cast<size_t>(s.n) * s.k, 82 + s.n));
    auto d_x = to_device<T>(x);
    auto d_w = to_device<T>(w);
    DeviceBuffer<float> d_y(static_cast<size_t>(s.m) * s.n);
    poison(d_y);
    gemm<T, float>(ctx.cublas(), ctx.stream(), d_y.get(), d_x.get(), d_w.get(), s.m, s.n, s.k);
    ctx.synchronize();
    CHECK(rel_error(to_host(d_y), gemm_ref(x, w, s.m, s.n, s.k)) < 1e-3);
  }
}

TEST_CASE("gemm with no rows does nothing and bad sizes throw") {
  CudaContext ctx(0);
  gemm<float, float>(ctx.cublas(), ctx.stream(), nullptr, nullptr, nullptr, 0, 8, 8);
  CHECK_THROWS_AS((gemm<float, float>(ctx.cublas(), ctx.stream(), nullptr, nullptr, nullptr, 2, 0, 8)), Error);
}

}  // namespace cbatch::test
