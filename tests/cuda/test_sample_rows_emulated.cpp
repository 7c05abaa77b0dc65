// The device sampler's block code (cuda/sampling/sample_rows.cuh) run on the CPU by the block emulator, so that its
// block-parallel primitives are checked where there is no GPU: for every row the token of the same
// algorithm on the host's sequential primitives and the Sampler's (sample_rows_case.hpp: greedy, NaN and
// penalized rows mixed in; and constrained rows, masked the engine's way). Also checks the emulator's
// intrinsics themselves.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tests/cuda/sample_rows_case.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the block code after it.
#include "tests/cuda/block_emulator.hpp"
#include "cuda/sampling/sample_rows.cuh"

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
    int checked = 0;
    for (auto [vocab, rows] : {std::pair{1, 3}, std::pair{5, 8}, std::pair{40, 16}, std::pair{257, 12},
                               std::pair{300, 20}, std::pair{1500, 6}, std::pair{5000, 3}}) {
      CAPTURE(vocab);
      const SampleRowsCase c = make_sample_rows_case(vocab, rows, rng);
      std::vector<float> logits = c.logits;  // penalized in place
      std::vector<int32_t> out(static_cast<size_t>(rows), -7);
      block_emulator::launch(static_cast<unsigned>(rows), device_sampling::kSampleThreads, [&] {
        device_sampling::sample_block_row(out.data(), logits.data(), c.params.data(), c.penalty_tokens.data(),
                                          c.token_mask.data(), vocab);
      });
      for (int r = 0; r < rows; ++r) {
        CAPTURE(r);
        CHECK(out[r] == c.want_host[r]);
        if (c.want_sampler[r] >= 0) CHECK(out[r] == c.want_sampler[r]);
        ++checked;
      }
    }
    CHECK(checked == 68);
  }

  TEST_CASE("constrained rows: the device sampler's block code draws the host's masked token (emulated)") {
    std::mt19937 rng(29);
    int masked = 0, only_eos = 0;
    for (auto [vocab, rows] : {std::pair{1, 4}, std::pair{70, 24}, std::pair{300, 24}, std::pair{5000, 13}}) {
      CAPTURE(vocab);
      const SampleRowsCase c = make_sample_rows_case(vocab, rows, rng, true);
      std::vector<float> logits = c.logits;  // masked and penalized in place
      std::vector<int32_t> out(static_cast<size_t>(rows), -7);
      block_emulator::launch(static_cast<unsigned>(rows), device_sampling::kSampleThreads, [&] {
        device_sampling::sample_block_row(out.data(), logits.data(), c.params.data(), c.penalty_tokens.data(),
                                          c.token_mask.data(), vocab);
      });
      for (int r = 0; r < rows; ++r) {
        const RowSampling& p = c.params[static_cast<size_t>(r)];
        CAPTURE(r);
        CHECK(out[r] == c.want_host[r]);
        if (c.want_sampler[r] >= 0) CHECK(out[r] == c.want_sampler[r]);
        if (p.mask_offset < 0) continue;
        ++masked;
        CHECK(token_allowed(&c.token_mask[static_cast<size_t>(p.mask_offset)], out[r]));
        if (r % 12 == 1) {
          ++only_eos;
          CHECK(out[r] == std::min(2, vocab - 1));
        }
      }
    }
    CHECK(masked >= 20);
    CHECK(only_eos == 6);
  }
}

}  // namespace cbatch::test
