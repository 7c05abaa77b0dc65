// The device sampler against the host: for every row the Sampler's token (rows without NaN) and the token
// of the same algorithm on the host's sequential primitives (every row), over sample_rows_case.hpp's rows
// (greedy, NaN and penalized rows mixed in; constrained rows in a second pass) and vocabularies from 1
// token to Llama 3's; the same ids again on a second launch. The output is poisoned first.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "cuda/sampling/sample_rows.hpp"
#include "engine/sample/radix_sampling.hpp"
#include "tests/cuda/sample_rows_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

TEST_CASE("sample_rows draws the host's token for every row, the same on every launch") {
  for (int vocab : {1, 300, 5000, 128256, -1, -300, -5000, -128256}) {  // < 0: constrained rows too
    const bool masked = vocab < 0;
    vocab = std::abs(vocab);
    const int rows = vocab == 128256 ? 96 : 400;
    CAPTURE(vocab);
    CAPTURE(masked);
    std::mt19937 rng(17 + vocab);
    const SampleRowsCase c = make_sample_rows_case(vocab, rows, rng, masked);
    DeviceBuffer<RowSampling> d_params(c.params.size());
    CUDA_CHECK(cudaMemcpy(d_params.get(), c.params.data(), d_params.bytes(), cudaMemcpyHostToDevice));
    DeviceBuffer<PenaltyToken> d_penalty_tokens(c.penalty_tokens.size());
    CUDA_CHECK(cudaMemcpy(d_penalty_tokens.get(), c.penalty_tokens.data(), d_penalty_tokens.bytes(),
                          cudaMemcpyHostToDevice));
    DeviceBuffer<uint64_t> d_token_mask(c.token_mask.size());
    CUDA_CHECK(cudaMemcpy(d_token_mask.get(), c.token_mask.data(), d_token_mask.bytes(), cudaMemcpyHostToDevice));
    DeviceBuffer<int32_t> d_out(static_cast<size_t>(rows));
    std::vector<int32_t> first;
    for (int launch = 0; launch < 2; ++launch) {
      auto d_logits = to_device<float>(c.logits);  // fresh: the penalties are applied in place
      poison(d_out);
      sample_rows(d_out.get(), d_logits.get(), d_params.get(), d_penalty_tokens.get(), d_token_mask.get(), rows, vocab,
                  nullptr);
      std::vector<int32_t> out(static_cast<size_t>(rows));
      CUDA_CHECK(cudaMemcpy(out.data(), d_out.get(), d_out.bytes(), cudaMemcpyDeviceToHost));
      int host_mismatches = 0, sampler_mismatches = 0;
      for (int r = 0; r < rows; ++r) {
        host_mismatches += out[r] != c.want_host[r];
        sampler_mismatches += c.want_sampler[r] >= 0 && out[r] != c.want_sampler[r];
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
    CHECK_THROWS_AS(sample_rows(nullptr, nullptr, nullptr, nullptr, nullptr, -1, 10, nullptr), Error);
    CHECK_THROWS_AS(sample_rows(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 0, nullptr), Error);
    CHECK_NOTHROW(sample_rows(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 10, nullptr));
  }
}

}  // namespace cbatch::test
