// The device sampler against the host: for every row the Sampler's token (rows without NaN) and the token
// of the same algorithm on the host's sequential primitives (every row), over the sampler tests' logits and
// parameters with greedy rows mixed in, vocabularies from 1 token to Llama 3's, and rows with NaN; the
// same ids again on a second launch. The output is poisoned first.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda/sample_rows.hpp"
#include "engine/radix_sampling.hpp"
#include "engine/sampler.hpp"
#include "tests/cuda/test_util.hpp"
#include "tests/engine/sampling_cases.hpp"

namespace cbatch::test {

TEST_CASE("sample_rows draws the host's token for every row, the same on every launch") {
  for (int vocab : {1, 300, 5000, 128256}) {
    const int rows = vocab == 128256 ? 96 : 400;
    CAPTURE(vocab);
    std::mt19937 rng(17 + vocab);
    Sampler sampler;
    std::vector<float> logits;
    std::vector<RowSampling> params;
    std::vector<int32_t> want_host, want_sampler;  // want_sampler: -1 for rows with NaN
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row = random_logits(vocab, r % 4, rng);
      const bool has_nan = r % 17 == 5;
      if (has_nan) row[static_cast<size_t>(r) % vocab] = std::numeric_limits<float>::quiet_NaN();
      SamplingParams p = random_sampling_params(r, vocab, rng);
      if (r % 13 == 0) p.temperature = 0.0f;
      const uint64_t seed = rng();
      const int draw = r % 7;
      params.push_back(row_sampling(p, seed, draw));
      radix_sampling::HostRowOps ops(row.data(), vocab);
      want_host.push_back(radix_sampling::sample_row(ops, params.back(), vocab));
      std::vector<float> scratch = row;
      const std::vector<int32_t> tokens(1 + static_cast<size_t>(draw), 1);
      want_sampler.push_back(has_nan ? -1 : sampler.sample(scratch.data(), vocab, p, tokens, 1, seed));
      logits.insert(logits.end(), row.begin(), row.end());
    }
    auto d_logits = to_device<float>(logits);
    DeviceBuffer<RowSampling> d_params(params.size());
    CUDA_CHECK(cudaMemcpy(d_params.get(), params.data(), d_params.bytes(), cudaMemcpyHostToDevice));
    DeviceBuffer<int32_t> d_out(static_cast<size_t>(rows));
    std::vector<int32_t> first;
    for (int launch = 0; launch < 2; ++launch) {
      poison(d_out);
      sample_rows(d_out.get(), d_logits.get(), d_params.get(), rows, vocab, nullptr);
      std::vector<int32_t> out(static_cast<size_t>(rows));
      CUDA_CHECK(cudaMemcpy(out.data(), d_out.get(), d_out.bytes(), cudaMemcpyDeviceToHost));
      int host_mismatches = 0, sampler_mismatches = 0;
      for (int r = 0; r < rows; ++r) {
        host_mismatches += out[r] != want_host[r];
        sampler_mismatches += want_sampler[r] >= 0 && out[r] != want_sampler[r];
      }
      CHECK(host_mismatches == 0);
      CHECK(sampler_mismatches == 0);
      if (launch == 0) first = out;
      CHECK(out == first);
    }
  }
}

TEST_SUITE("host") {
  TEST_CASE("sample_rows rejects bad sizes and launches nothing for zero rows") {
    CHECK_THROWS_AS(sample_rows(nullptr, nullptr, nullptr, -1, 10, nullptr), Error);
    CHECK_THROWS_AS(sample_rows(nullptr, nullptr, nullptr, 1, 0, nullptr), Error);
    CHECK_NOTHROW(sample_rows(nullptr, nullptr, nullptr, 0, 10, nullptr));
  }
}

}  // namespace cbatch::test
