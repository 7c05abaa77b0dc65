// FP8 weights' pieces: cuBLASLt opened on first use and the weight-shape rule (host suite); on a GPU of
// compute capability 8.9 or newer, fp8_quantize bit-exact with the host reference (fp8.hpp) on a tensor
// larger than one grid, the cuBLASLt FP8 GEMM against a double-precision reference computed from the same
// codes and scales (so the only differences are fp32 accumulation order and the output rounding) over the
// Llama 1B and 8B matrix shapes and ragged m, and the weight upload's refusal of NaN naming the tensor.
#include <doctest/doctest.h>

#include <cmath>
#include <type_traits>
#include <utility>
#include <random>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.hpp"
#include "cuda/common/cublaslt_library.hpp"
#include "cuda/common/cuda_context.hpp"
#include "cuda/gemm/fp8_gemm.hpp"
#include "cuda/gemm/fp8_quantize.hpp"
#include "cuda/gemm/linear.hpp"
#include "engine/model/fp8.hpp"
#include "tests/cuda/fp8_gpu.hpp"
#include "tests/cuda/library_probe.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {
namespace {

bool cublaslt_in_process() { return library_in_process("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR)); }

const bool kCublasLtLoadedAtStart = cublaslt_in_process();  // during static initialisation

// Random E4M3 codes of every finite value (0x7F and 0xFF are NaN).
std::vector<uint8_t> random_codes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> codes(n);
  for (uint8_t& c : codes) {
    do {
      c = static_cast<uint8_t>(rng());
    } while ((c & 0x7Fu) == 0x7Fu);
  }
  return codes;
}

DeviceBuffer<uint8_t> codes_to_device(const std::vector<uint8_t>& codes) {
  DeviceBuffer<uint8_t> d(codes.size());
  CUDA_CHECK(cudaMemcpy(d.get(), codes.data(), codes.size(), cudaMemcpyHostToDevice));
  return d;
}

DeviceBuffer<float> scalar_to_device(float v) {
  DeviceBuffer<float> d(1);
  CUDA_CHECK(cudaMemcpy(d.get(), &v, sizeof v, cudaMemcpyHostToDevice));
  return d;
}

// 0, step, 2 step, ... and n - 1.
std::vector<int> sampled(int n, int step) {
  std::vector<int> picked;
  for (int i = 0; i < n - 1; i += step) picked.push_back(i);
  picked.push_back(n - 1);
  return picked;
}

// Y = (X codes * sx)(W codes * sw)^T on rows and columns sampled with strides (every row for small m),
// first and last included, in double from the decoded codes; returns ||y - ref|| / ||ref|| over them.
double sampled_gemm_error(const std::vector<float>& y, const std::vector<uint8_t>& x, const std::vector<uint8_t>& w,
                          float sx, float sw, int m, int n, int k) {
  std::vector<float> xf(x.size()), wf(w.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = fp8_e4m3_to_float(x[i]);
  for (size_t i = 0; i < w.size(); ++i) wf[i] = fp8_e4m3_to_float(w[i]);
  std::vector<float> out;
  std::vector<double> ref;
  for (int r : sampled(m, m > 16 ? 13 : 1)) {
    for (int c : sampled(n, 61)) {
      const float* xr = xf.data() + static_cast<size_t>(r) * k;
      const float* wc = wf.data() + static_cast<size_t>(c) * k;
      double acc = 0.0;
      for (int p = 0; p < k; ++p) acc += static_cast<double>(xr[p]) * wc[p];
      ref.push_back(acc * sx * sw);
      out.push_back(y[static_cast<size_t>(r) * n + c]);
    }
  }
  return rel_error(out, ref);
}

template <typename T>
void check_fp8_gemm(const CudaContext& ctx, Fp8Gemm& fp8, int m, int n, int k) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  const std::vector<uint8_t> x = random_codes(static_cast<size_t>(m) * k, 101 + m);
  const std::vector<uint8_t> w = random_codes(static_cast<size_t>(n) * k, 102 + n);
  const float sx = 0.0123f, sw = 3.0e-4f;  // as from amax ~5.5 and ~0.13
  auto d_x = codes_to_device(x);
  auto d_w = codes_to_device(w);
  auto d_sx = scalar_to_device(sx);
  auto d_sw = scalar_to_device(sw);
  DeviceBuffer<T> d_y(static_cast<size_t>(m) * n);
  poison(d_y);
  fp8.run<T>(d_y.get(), d_x.get(), d_sx.get(), d_w.get(), d_sw.get(), m, n, k, ctx.stream());
  ctx.synchronize();
  const std::vector<float> y = to_host(d_y);
  bool finite = true;
  for (float v : y) finite = finite && std::isfinite(v);
  CHECK(finite);  // every element written (the output was NaN before)
  // Exact products, sums promoted to fp32 (fast accumulation off) and one rounding to T: rms 1.6e-3
  // relative in bf16, 2e-4 in fp16. A wrong layout, scale or type is off by 1 and more.
  CHECK(sampled_gemm_error(y, x, w, sx, sw, m, n, k) < (std::is_same_v<T, __half> ? 1e-3 : 4e-3));
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("cuBLASLt is opened on first use, not at process start") {
    CHECK_FALSE(kCublasLtLoadedAtStart);
    const CublasLtLibrary& lib = cublaslt_library();
    CHECK(cublaslt_in_process());
    CHECK(&cublaslt_library() == &lib);
    for (bool ok : {resolved(lib.create), resolved(lib.destroy), resolved(lib.desc_create), resolved(lib.desc_destroy),
                    resolved(lib.desc_set), resolved(lib.layout_create), resolved(lib.layout_destroy),
                    resolved(lib.preference_create), resolved(lib.preference_destroy), resolved(lib.preference_set),
                    resolved(lib.heuristic), resolved(lib.matmul), resolved(lib.status_string)}) {
      CHECK(ok);
    }
    const std::string unsupported = lib.status_string(CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK_FALSE(unsupported.empty());
  }

  TEST_CASE("fp8 weights: both dimensions multiples of 16, or an error naming the tensor and its shape") {
    check_fp8_weight_shape("blk.0.ffn_gate.weight", 8192, 2048);
    check_fp8_weight_shape("blk.0.ffn_down.weight", 4096, 14336);
    for (const auto& shape : {std::pair<int64_t, int64_t>{172, 64}, {64, 172}, {8, 2048}}) {
      const int64_t rows = shape.first, cols = shape.second;
      try {
        check_fp8_weight_shape("blk.3.ffn_down.weight", rows, cols);
        FAIL("accepted (" << rows << ", " << cols << ")");
      } catch (const Error& e) {
        const std::string what = e.what();
        CHECK(what.find("'blk.3.ffn_down.weight'") != std::string::npos);
        CHECK(what.find("(" + std::to_string(rows) + ", " + std::to_string(cols) + ")") != std::string::npos);
        CHECK(what.find("--quantization fp8") != std::string::npos);
      }
    }
  }
}

TEST_CASE_TEMPLATE("fp8_quantize on the device equals the host reference bit for bit", T, float, __nv_bfloat16,
                   __half) {
  // More elements than 1024 blocks take in one stride; a planted amax and a few saturating neighbours.
  std::vector<float> x = round_to<T>(random_vector(size_t{5} << 20, 111, -2.0f, 2.0f));
  x[4321987] = -9.5f;
  auto d_x = to_device<T>(x);
  DeviceBuffer<uint8_t> d_q(x.size());
  DeviceBuffer<float> d_scale(1), d_partials(kFp8PartialFloats);
  CUDA_CHECK(cudaMemset(d_q.get(), 0x7F, d_q.bytes()));
  fp8_quantize<T>(d_q.get(), d_scale.get(), d_x.get(), x.size(), d_partials.get(), nullptr);
  CHECK(fp8_amax<T>(d_x.get(), x.size(), d_partials.get(), nullptr) == 9.5f);
  const float scale = to_host(d_scale)[0];
  REQUIRE(scale == 9.5f / 448.0f);
  std::vector<uint8_t> q(x.size());
  CUDA_CHECK(cudaMemcpy(q.data(), d_q.get(), q.size(), cudaMemcpyDeviceToHost));
  size_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) mismatches += q[i] != fp8_e4m3_from_float(x[i] / scale);
  CHECK(mismatches == 0);
  CHECK(q[4321987] == 0xFEu);
}

TEST_CASE_TEMPLATE("the cuBLASLt FP8 GEMM equals a reference on the same codes (1B and 8B shapes, ragged m)", T,
                   __nv_bfloat16, __half) {
  if (!has_fp8_gpu()) return;
  CudaContext ctx(0);
  Fp8Gemm fp8(ctx.cublas_workspace(), ctx.cublas_workspace_bytes());
  check_fp8_gemm<T>(ctx, fp8, 5, 48, 32);
  for (int m : {1, 7, 300}) {
    for (const auto& nk : {std::pair<int, int>{8192, 2048}, {2048, 8192}, {14336, 4096}, {4096, 14336}}) {
      check_fp8_gemm<T>(ctx, fp8, m, nk.first, nk.second);
    }
  }
  check_fp8_gemm<T>(ctx, fp8, 7, 8192, 2048);  // a cached plan, used again
  CHECK_THROWS_AS(fp8.run<T>(nullptr, nullptr, nullptr, nullptr, nullptr, 4, 48, 24, ctx.stream()), Error);
  CHECK_THROWS_AS(fp8.run<T>(nullptr, nullptr, nullptr, nullptr, nullptr, 4, 48, 32, ctx.stream()), Error);
}

TEST_CASE("quantize_weight_fp8 refuses a tensor holding a NaN or an infinity, naming it") {
  if (!has_fp8_gpu()) return;
  CudaContext ctx(0);
  for (float bad : {NAN, -INFINITY}) {
    std::vector<float> w = random_vector(96 * 64, 121);
    w[40 * 64 + 3] = bad;  // in rows 32..63: the second part
    const std::vector<WeightPart> parts = {{"blk.2.attn_q.weight", 0, 32}, {"blk.2.attn_k.weight", 32, 32},
                                           {"blk.2.attn_v.weight", 64, 32}};
    try {
      quantize_weight_fp8<__nv_bfloat16>(to_device<__nv_bfloat16>(w), 96, 64, parts, ctx.stream());
      FAIL("accepted a non-finite weight");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("'blk.2.attn_k.weight' holds a NaN or an infinity") != std::string::npos);
    }
  }
  const LinearWeight<__nv_bfloat16> ok = quantize_weight_fp8<__nv_bfloat16>(
      to_device<__nv_bfloat16>(random_vector(96 * 64, 122)), 96, 64, {{"w", 0, 96}}, ctx.stream());
  CHECK(ok.is_fp8());
  CHECK(ok.bytes() == 96 * 64 + sizeof(float));
}

}  // namespace cbatch::test
