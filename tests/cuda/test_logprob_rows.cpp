// The device log-softmax and top-k (cuda/sampling/logprob_rows.cu) against the host's reduction over
// logprob_case.hpp's tasks (ties, -inf, NaN, k from 0 to above the vocabulary, targets given or from
// token_ids), vocabularies from 1 token to Llama 3's; the outputs are poisoned first, and a second launch
// gives the same bits.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/sampling/logprob_rows.hpp"
#include "tests/cuda/logprob_case.hpp"
#include "tests/cuda/test_util.hpp"

namespace cbatch::test {

TEST_CASE("logprob_rows gives the host's top ids and values for every task, the same on every launch") {
  for (int vocab : {1, 300, 5000, 128256}) {
    CAPTURE(vocab);
    std::mt19937 rng(41 + vocab);
    const LogprobCase c = make_logprob_case(vocab, vocab == 128256 ? 8 : 40, rng);
    auto d_logits = to_device<float>(c.logits);
    auto d_token_ids = to_device_i32(c.token_ids);
    DeviceBuffer<device_logprobs::LogprobTask> d_tasks(c.tasks.size());
    CUDA_CHECK(cudaMemcpy(d_tasks.get(), c.tasks.data(), d_tasks.bytes(), cudaMemcpyHostToDevice));
    const size_t tasks = c.tasks.size(), width = static_cast<size_t>(c.width);
    DeviceBuffer<float> d_target(tasks), d_lps(tasks * width);
    DeviceBuffer<int32_t> d_ids(tasks * width);
    std::vector<float> first;
    for (int launch = 0; launch < 2; ++launch) {
      poison(d_target);
      poison(d_lps);
      poison(d_ids);
      logprob_rows(d_logits.get(), d_token_ids.get(), d_tasks.get(), static_cast<int>(tasks), vocab,
                   {d_target.get(), d_ids.get(), d_lps.get(), c.width}, nullptr);
      const std::vector<float> target = to_host(d_target), lps = to_host(d_lps);
      std::vector<int32_t> ids(tasks * width);
      CUDA_CHECK(cudaMemcpy(ids.data(), d_ids.get(), d_ids.bytes(), cudaMemcpyDeviceToHost));
      int mismatches = 0;
      for (size_t t = 0; t < tasks; ++t) {
        mismatches += !close_logprob(target[t], c.want_target[t]);
        for (size_t i = t * width; i < (t + 1) * width; ++i) {
          mismatches += ids[i] != c.want_ids[i] || !close_logprob(lps[i], c.want_lps[i]);
        }
      }
      CHECK(mismatches == 0);
      if (launch == 0) first = lps;
      CHECK(std::equal(lps.begin(), lps.end(), first.begin(), first.end(),
                       [](float a, float b) { return a == b || (a != a && b != b); }));
    }
  }
}

}  // namespace cbatch::test
