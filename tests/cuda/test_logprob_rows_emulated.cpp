// The device log-softmax and top-k's block code (cuda/sampling/logprob_rows.cuh) run on the CPU by the block
// emulator against the host's reduction (logprob_case.hpp: ties, -inf, NaN, k from 0 to above the
// vocabulary, targets given or from token_ids): the same top ids, values within 1e-5.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tests/cuda/logprob_case.hpp"
// Last: the emulator defines the CUDA keywords as macros, for the block code after it.
#include "tests/cuda/block_emulator.hpp"
#include "cuda/sampling/logprob_rows.cuh"

namespace cbatch::test {

TEST_SUITE("host") {
  TEST_CASE("the device logprob block code gives the host's top ids and values (emulated)") {
    std::mt19937 rng(31);
    for (auto [vocab, rows] : {std::pair{1, 3}, std::pair{7, 6}, std::pair{300, 12}, std::pair{2000, 5}}) {
      CAPTURE(vocab);
      const LogprobCase c = make_logprob_case(vocab, rows, rng);
      const size_t tasks = c.tasks.size();
      std::vector<float> target(tasks, 7.0f), lps(tasks * c.width, 7.0f);
      std::vector<int32_t> ids(tasks * c.width, -7);
      const device_logprobs::LogprobOutputs out{target.data(), ids.data(), lps.data(), c.width};
      block_emulator::launch(static_cast<unsigned>(tasks), device_logprobs::kLogprobThreads, [&] {
        static device_logprobs::LogprobShared shared;  // one block at a time: __shared__ as a static
        device_logprobs::logprob_block_row(c.logits.data(), c.token_ids.data(), c.tasks.data(), vocab, out, shared);
      });
      int mismatches = 0;
      for (size_t t = 0; t < tasks; ++t) {
        mismatches += !close_logprob(target[t], c.want_target[t]);
        for (size_t j = 0; j < static_cast<size_t>(c.width); ++j) {
          const size_t i = t * c.width + j;
          mismatches += ids[i] != c.want_ids[i] || !close_logprob(lps[i], c.want_lps[i]);
        }
      }
      CHECK(mismatches == 0);
    }
  }
}

}  // namespace cbatch::test
