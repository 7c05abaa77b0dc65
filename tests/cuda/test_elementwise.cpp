// Kernel tests against CPU references: embedding gather (and its scaled build), RMSNorm with residual add
// and its gather variant (and their sandwich-norm builds), SwiGLU and GeGLU, the logit softcap, argmax, and
// the weight fill/convert kernels. Outputs are poisoned with NaN first.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "cuda/backend/weight_convert.hpp"
#include "cuda/elementwise/embedding.hpp"
#include "cuda/elementwise/rmsnorm.hpp"
#include "cuda/elementwise/softcap.hpp"
#include "cuda/elementwise/swiglu.hpp"
#include "cuda/sampling/argmax.hpp"
#include "engine/model/random_weights.hpp"
#include "tests/cuda/reference.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

#define CBATCH_TEST_TYPES float, __nv_bfloat16, __half

TEST_CASE_TEMPLATE("embedding gathers rows and widens them to fp32 (and scales them, Gemma's sqrt(dim))", T,
                   CBATCH_TEST_TYPES) {
  for (const auto& [dim, scale] : {std::pair{20, 1.0f}, std::pair{64, 1.0f}, std::pair{172, 1.0f},
                                   std::pair{64, 8.0f}, std::pair{172, 50.596443f}}) {
    const int vocab = 37;
    const std::vector<float> table = round_to<T>(random_vector(static_cast<size_t>(vocab) * dim, 1 + dim));
    const std::vector<int32_t> tokens = {5, 0, 36, 5, 17, 2, 36, 9, 1};
    const int n = static_cast<int>(tokens.size());
    auto d_table = to_device<T>(table);
    auto d_tokens = to_device_i32(tokens);
    DeviceBuffer<float> d_x(static_cast<size_t>(n) * dim);
    poison(d_x);
    embedding<T>(d_x.get(), d_table.get(), d_tokens.get(), n, dim, nullptr, scale);
    std::vector<double> ref;
    for (int r = 0; r < n; ++r) {  // the fp32 product, as the CPU backend scales its rows
      for (int i = 0; i < dim; ++i) ref.push_back(table[static_cast<size_t>(tokens[r]) * dim + i] * scale);
    }
    CAPTURE(dim);
    CAPTURE(scale);
    CHECK(rel_error(to_host(d_x), ref) == 0.0);
  }
}

TEST_CASE_TEMPLATE("rmsnorm_residual adds the residual and normalizes", T, CBATCH_TEST_TYPES) {
  const float eps = 1e-5f;
  for (int rows : {1, 7, 33}) {
    for (int dim : {64, 172, 4096}) {
      for (bool with_delta : {false, true}) {
        CAPTURE(rows);
        CAPTURE(dim);
        CAPTURE(with_delta);
        const size_t n = static_cast<size_t>(rows) * dim;
        const std::vector<float> x = random_vector(n, 11 + rows + dim, -2.0f, 2.0f);
        const std::vector<float> delta = with_delta ? round_to<T>(random_vector(n, 12 + dim)) : std::vector<float>{};
        const std::vector<float> w = random_vector(static_cast<size_t>(dim), 13, 0.5f, 1.5f);
        auto d_x = to_device<float>(x);
        auto d_delta = to_device<T>(delta);
        auto d_w = to_device<float>(w);
        DeviceBuffer<T> d_out(n);
        poison(d_out);
        rmsnorm_residual<T>(d_out.get(), d_x.get(), with_delta ? d_delta.get() : nullptr, d_w.get(), rows, dim, eps,
                            nullptr);
        std::vector<double> x_ref, out_ref;
        rmsnorm_ref(x, delta, w, rows, dim, eps, x_ref, out_ref);
        CHECK(rel_error(to_host(d_x), x_ref) == 0.0);  // one fp32 add, exactly as the reference
        CHECK(rel_error(to_host(d_out), out_ref) < tolerance<T>());
      }
    }
  }
}

TEST_CASE_TEMPLATE("rmsnorm_residual with a sandwich norm normalizes delta before adding it", T, CBATCH_TEST_TYPES) {
  const float eps = 1e-6f;
  for (int rows : {1, 9}) {
    for (int dim : {172, 2560}) {
      CAPTURE(rows);
      CAPTURE(dim);
      const size_t n = static_cast<size_t>(rows) * dim;
      const std::vector<float> x = random_vector(n, 71 + dim, -2.0f, 2.0f);
      const std::vector<float> delta = round_to<T>(random_vector(n, 72 + dim, -30.0f, 30.0f));  // far from unit rms
      const std::vector<float> w = random_vector(static_cast<size_t>(dim), 73, 0.5f, 1.5f);
      const std::vector<float> post = random_vector(static_cast<size_t>(dim), 74, 0.5f, 2.5f);
      auto d_x = to_device<float>(x);
      auto d_delta = to_device<T>(delta);
      auto d_w = to_device<float>(w);
      auto d_post = to_device<float>(post);
      DeviceBuffer<T> d_out(n);
      poison(d_out);
      rmsnorm_residual<T>(d_out.get(), d_x.get(), d_delta.get(), d_w.get(), rows, dim, eps, nullptr, d_post.get());
      std::vector<double> x_ref, out_ref;
      rmsnorm_ref(x, delta, w, rows, dim, eps, x_ref, out_ref, post);
      CHECK(rel_error(to_host(d_x), x_ref) < 1e-6);  // fp32 arithmetic throughout
      CHECK(rel_error(to_host(d_out), out_ref) < tolerance<T>());

      // The gather build: the same rows' final norm, x untouched.
      auto d_x2 = to_device<float>(x);
      const std::vector<int32_t> picked = {rows - 1, 0};
      auto d_rows = to_device_i32(picked);
      DeviceBuffer<T> d_picked(picked.size() * dim);
      poison(d_picked);
      rmsnorm_gather<T>(d_picked.get(), d_x2.get(), d_delta.get(), d_w.get(), d_rows.get(),
                        static_cast<int>(picked.size()), dim, eps, nullptr, d_post.get());
      std::vector<double> picked_ref;
      for (int r : picked) {
        picked_ref.insert(picked_ref.end(), out_ref.begin() + static_cast<long>(r) * dim,
                          out_ref.begin() + static_cast<long>(r + 1) * dim);
      }
      CHECK(rel_error(to_host(d_picked), picked_ref) < tolerance<T>());
      CHECK(to_host(d_x2) == x);
    }
  }
  CHECK_THROWS_AS(rmsnorm_residual<T>(nullptr, nullptr, nullptr, nullptr, 1, 64, 1e-6f, nullptr,
                                      reinterpret_cast<const float*>(&eps)),
                  Error);  // a post norm without a delta
}

TEST_CASE_TEMPLATE("rmsnorm_gather normalizes selected rows and leaves x alone", T, CBATCH_TEST_TYPES) {
  const int rows = 9;
  const int dim = 172;
  const float eps = 1e-6f;
  const std::vector<int32_t> picked = {0, 3, 8};
  const size_t n = static_cast<size_t>(rows) * dim;
  const std::vector<float> x = random_vector(n, 21, -3.0f, 3.0f);
  const std::vector<float> delta = round_to<T>(random_vector(n, 22));
  const std::vector<float> w = random_vector(dim, 23, 0.5f, 1.5f);
  auto d_x = to_device<float>(x);
  auto d_delta = to_device<T>(delta);
  auto d_w = to_device<float>(w);
  auto d_rows = to_device_i32(picked);
  DeviceBuffer<T> d_out(picked.size() * dim);
  poison(d_out);
  rmsnorm_gather<T>(d_out.get(), d_x.get(), d_delta.get(), d_w.get(), d_rows.get(), static_cast<int>(picked.size()),
                    dim, eps, nullptr);
  std::vector<double> x_ref, out_ref;
  rmsnorm_ref(x, delta, w, rows, dim, eps, x_ref, out_ref);
  std::vector<double> picked_ref;
  for (int r : picked) {
    picked_ref.insert(picked_ref.end(), out_ref.begin() + static_cast<long>(r) * dim,
                      out_ref.begin() + static_cast<long>(r + 1) * dim);
  }
  CHECK(rel_error(to_host(d_out), picked_ref) < tolerance<T>());
  CHECK(to_host(d_x) == x);
}

TEST_CASE_TEMPLATE("swiglu multiplies silu(gate) by up", T, CBATCH_TEST_TYPES) {
  for (int rows : {1, 5, 17}) {
    for (int hidden : {172, 1000}) {
      CAPTURE(rows);
      CAPTURE(hidden);
      const std::vector<float> gate_up =
          round_to<T>(random_vector(static_cast<size_t>(rows) * 2 * hidden, 31 + hidden, -6.0f, 6.0f));
      auto d_gate_up = to_device<T>(gate_up);
      DeviceBuffer<T> d_out(static_cast<size_t>(rows) * hidden);
      poison(d_out);
      swiglu<T>(d_out.get(), d_gate_up.get(), rows, hidden, nullptr);
      std::vector<double> ref;
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < hidden; ++c) {
          const float* row = gate_up.data() + static_cast<size_t>(r) * 2 * hidden;
          ref.push_back(silu_ref(row[c]) * row[hidden + c]);
        }
      }
      CHECK(rel_error(to_host(d_out), ref) < tolerance<T>());
    }
  }
}

TEST_CASE_TEMPLATE("swiglu with GeGLU multiplies tanh-gelu(gate) by up", T, CBATCH_TEST_TYPES) {
  for (int rows : {1, 6}) {
    for (int hidden : {172, 1000}) {
      CAPTURE(rows);
      CAPTURE(hidden);
      const std::vector<float> gate_up =
          round_to<T>(random_vector(static_cast<size_t>(rows) * 2 * hidden, 35 + hidden, -6.0f, 6.0f));
      auto d_gate_up = to_device<T>(gate_up);
      DeviceBuffer<T> d_out(static_cast<size_t>(rows) * hidden);
      poison(d_out);
      swiglu<T>(d_out.get(), d_gate_up.get(), rows, hidden, nullptr, Activation::kGeluTanh);
      std::vector<double> ref;
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < hidden; ++c) {
          const float* row = gate_up.data() + static_cast<size_t>(r) * 2 * hidden;
          ref.push_back(gelu_tanh_ref(row[c]) * row[hidden + c]);
        }
      }
      CHECK(rel_error(to_host(d_out), ref) < tolerance<T>());
    }
  }
}

TEST_CASE("softcap bends logits to cap * tanh(logit / cap)") {
  for (const float cap : {30.0f, 5.0f}) {
    CAPTURE(cap);
    const std::vector<float> logits = random_vector(3 * 1000 + 7, 81, -200.0f, 200.0f);
    auto d_logits = to_device<float>(logits);
    softcap(d_logits.get(), logits.size(), cap, nullptr);
    std::vector<double> ref;
    for (float v : logits) ref.push_back(cap * std::tanh(static_cast<double>(v) / cap));
    CHECK(rel_error(to_host(d_logits), ref) < 1e-6);
  }
  CHECK_THROWS_AS(softcap(nullptr, 10, 0.0f, nullptr), Error);
}

TEST_CASE("argmax picks the largest logit, the lowest id on ties, and ignores NaN") {
  for (int vocab : {1000, 128256}) {
    CAPTURE(vocab);
    const int rows = 6;
    std::vector<float> logits = random_vector(static_cast<size_t>(rows) * vocab, 41 + vocab, -5.0f, 5.0f);
    auto row = [&](int r) { return logits.data() + static_cast<size_t>(r) * vocab; };
    row(0)[10] = 7.0f;  // tie between ids 10 and vocab - 3: the lower wins
    row(0)[vocab - 3] = 7.0f;
    for (int i = 0; i < vocab; ++i) row(1)[i] = 0.25f;  // all equal: id 0
    row(2)[vocab - 1] = 9.0f;                          // the last id
    row(3)[3] = std::numeric_limits<float>::quiet_NaN();  // NaN never wins
    row(3)[vocab / 2] = 8.0f;
    for (int i = 0; i < vocab; ++i) row(4)[i] = -std::numeric_limits<float>::infinity();  // all -inf: id 0
    auto d_logits = to_device<float>(logits);
    DeviceBuffer<int32_t> d_out(rows);
    poison(d_out);
    argmax(d_out.get(), d_logits.get(), rows, vocab, nullptr);
    std::vector<int32_t> out(rows);
    CUDA_CHECK(cudaMemcpy(out.data(), d_out.get(), rows * sizeof(int32_t), cudaMemcpyDeviceToHost));
    CHECK(out[0] == 10);
    CHECK(out[1] == 0);
    CHECK(out[2] == vocab - 1);
    CHECK(out[3] == vocab / 2);
    CHECK(out[4] == 0);
    for (int r = 0; r < rows; ++r) CHECK(out[r] == argmax_ref(row(r), vocab));
  }
}

TEST_CASE_TEMPLATE("fill_random matches the host generator bit for bit", T, CBATCH_TEST_TYPES) {
  const size_t n = 100003;
  const uint64_t seed = 0x5eed;
  const float scale = 0.02f;
  const float offset = 1.0f;
  DeviceBuffer<T> d_out(n);
  poison(d_out);
  fill_random<T>(d_out.get(), n, seed, scale, offset, nullptr);
  const std::vector<float> out = to_host(d_out);
  size_t mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    const float expected = to_f32(from_f32<T>(random_element(seed, scale, offset, i)));
    if (std::memcmp(&out[i], &expected, sizeof(float)) != 0) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE_TEMPLATE("convert_f32 rounds to nearest even like the host", T, CBATCH_TEST_TYPES) {
  const std::vector<float> in = random_vector(4099, 51, -100.0f, 100.0f);
  auto d_in = to_device<float>(in);
  DeviceBuffer<T> d_out(in.size());
  poison(d_out);
  convert_f32<T>(d_out.get(), d_in.get(), in.size(), nullptr);
  CHECK(to_host(d_out) == round_to<T>(in));
}

}  // namespace cbatch::test
