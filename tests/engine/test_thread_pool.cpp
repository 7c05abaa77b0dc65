#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/base/thread_pool.hpp"

using namespace cbatch;

namespace {
// Runs `loops` parallel_for calls over n items and checks every item ran exactly once in each, in a chunk
// that starts on a multiple of align.
void check_coverage(ThreadPool& pool, int loops, int64_t n, int64_t align) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  for (int loop = 0; loop < loops; ++loop) {
    for (auto& h : hits) h.store(0);
    std::atomic<bool> misaligned{false};
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      if (begin % align != 0) misaligned.store(true);
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    }, align);
    for (int64_t i = 0; i < n; ++i) REQUIRE(hits[static_cast<size_t>(i)].load() == 1);
    REQUIRE_FALSE(misaligned.load());
  }
}
}  // namespace

TEST_CASE("thread pool: every item runs exactly once, with sleeping or spinning workers") {
  for (int64_t spin_ns : {int64_t{0}, int64_t{1'000}, kDecodeSpinNs}) {
    for (int threads : {1, 2, 3}) {
      CAPTURE(spin_ns);
      CAPTURE(threads);
      ThreadPool pool(threads, spin_ns);
      check_coverage(pool, 2000, 7, 1);  // many short loops back to back: workers stay warm
      check_coverage(pool, 20, 100, 3);
      std::this_thread::sleep_for(std::chrono::microseconds(5));
      check_coverage(pool, 3, 1, 1);     // fewer items than threads
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin window: workers asleep
      check_coverage(pool, 20, 64, 16);
    }
  }
}

TEST_CASE("thread pool: a loop waits for a chunk a worker is still running") {
  ThreadPool pool(2, kDecodeSpinNs);
  for (int loop = 0; loop < 50; ++loop) {
    std::atomic<int> finished{0};
    pool.parallel_for(2, [&](int64_t begin, int64_t) {
      if (begin == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
      finished.fetch_add(1);
    });
    REQUIRE(finished.load() == 2);
  }
}
