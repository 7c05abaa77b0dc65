// The device sampler's block code (cuda/sample_rows.cuh) run on the CPU by the block emulator, so that its
// block-parallel primitives are checked where there is no GPU: the token of the same algorithm on the
// host's sequential primitives and the Sampler's, for every row, over the sampler tests' logits and
// parameters with greedy and NaN rows mixed in. Also checks the emulator's intrinsics themselves.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/radix_sampling.hpp"
#include "engine/sampler.hpp"
#include "tests/cuda/block_emulator.hpp"  // before the block code: defines the CUDA keywords
#include "cuda/sample_rows.cuh"
#include "tests/engine/sampling_cases.hpp"

namespace cbatch::test {

TEST_SUITE("host") {
  TEST_CASE("block emulator: shuffles, scans, ballots, matches and barriers behave as on a GPU") {
    std::vector<int> scan(64), xor_sum(64), ballot(64), match(64), shared_sum(64);
    static int totals[2];
    block_emulator::launch(1, 64, [&] {
      const int t = static_cast<int>(threadIdx.x), lane = t % 32;
      int s = lane + 1;  // inclusive scan of 1..32
      for (int offset = 1; offset < 32; offset <<= 1) {
        const int other = __shfl_up_sync(0xFFFFFFFFu, s, offset);
        if (lane >= offset) s += other;
      }
      scan[t] = s;
      int x = t;
      for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, offset);
      xor_sum[t] = x;
      ballot[t] = static_cast<int>(__ballot_sync(0xFFFFFFFFu, lane % 3 == 0));
      match[t] = static_cast<int>(__match_any_sync(0xFFFFFFFFu, lane % 2));
      if (lane == 0) totals[t / 32] = x;
      __syncthreads();
      shared_sum[t] = totals[0] + totals[1];
    });
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32;
      CAPTURE(t);
      CHECK(scan[t] == (lane + 1) * (lane + 2) / 2);
      CHECK(xor_sum[t] == (t < 32 ? 496 : 1520));
      CHECK(static_cast<unsigned>(ballot[t]) == 0x49249249u);
      CHECK(static_cast<unsigned>(match[t]) == (lane % 2 == 0 ? 0x55555555u : 0xAAAAAAAAu));
      CHECK(shared_sum[t] == 2016);
    }
    CHECK_THROWS_AS(block_emulator::launch(1, 64, [] {
                      if (threadIdx.x != 5) __syncthreads();  // thread 5 never arrives
                    }),
                    std::runtime_error);
  }

  TEST_CASE("the device sampler's block code draws the host's token for every row (emulated)") {
    std::mt19937 rng(23);
    Sampler sampler;
    int checked = 0;
    for (auto [vocab, rows] : {std::pair{1, 3}, std::pair{5, 8}, std::pair{40, 16}, std::pair{257, 12},
                               std::pair{300, 20}, std::pair{1500, 6}, std::pair{5000, 3}}) {
      CAPTURE(vocab);
      std::vector<float> logits;
      std::vector<RowSampling> params;
      std::vector<int32_t> want_host, want_sampler;  // want_sampler: -1 for rows with NaN
      for (int r = 0; r < rows; ++r) {
        std::vector<float> row = random_logits(vocab, r % 4, rng);
        const bool has_nan = r % 7 == 3;
        if (has_nan) row[static_cast<size_t>(r) % vocab] = std::numeric_limits<float>::quiet_NaN();
        SamplingParams p = random_sampling_params(r, vocab, rng);
        if (r % 9 == 0) p.temperature = 0.0f;
        const uint64_t seed = rng();
        params.push_back(row_sampling(p, seed, r % 5));
        radix_sampling::HostRowOps ops(row.data(), vocab);
        want_host.push_back(radix_sampling::sample_row(ops, params.back(), vocab));
        std::vector<float> scratch = row;
        const std::vector<int32_t> tokens(1 + static_cast<size_t>(r % 5), 1);
        want_sampler.push_back(has_nan ? -1 : sampler.sample(scratch.data(), vocab, p, tokens, 1, seed));
        logits.insert(logits.end(), row.begin(), row.end());
      }
      std::vector<int32_t> out(static_cast<size_t>(rows), -7);
      block_emulator::launch(static_cast<unsigned>(rows), device_sampling::kSampleThreads, [&] {
        device_sampling::sample_block_row(out.data(), logits.data(), params.data(), vocab);
      });
      for (int r = 0; r < rows; ++r) {
        CAPTURE(r);
        CHECK(out[r] == want_host[r]);
        if (want_sampler[r] >= 0) CHECK(out[r] == want_sampler[r]);
        ++checked;
      }
    }
    CHECK(checked == 68);
  }
}

}  // namespace cbatch::test
