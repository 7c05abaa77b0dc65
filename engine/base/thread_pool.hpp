// A fixed pool of worker threads for data-parallel loops: the CPU backend's kernels, and the engine's
// sampling of a step's rows. parallel_for splits a range into one contiguous chunk per thread (the caller
// runs the first), so work placement never changes results: every output element is computed by the same
// code whatever its chunk.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cbatch {

// One-core time under which a loop runs on the calling thread: a parallel_for round trip (wake the
// workers, wait for them) costs 35-50 us on the 2-core development VM.
constexpr double kMinParallelNs = 40'000;

// The min_parallel argument of parallel_for for items that take about per_item_ns each on one core.
inline int64_t min_parallel_items(double per_item_ns) {
  return 1 + static_cast<int64_t>(kMinParallelNs / (per_item_ns > 1.0 ? per_item_ns : 1.0));
}

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n); chunk boundaries are multiples of `align`.
  // Runs inline when n is below `min_parallel` (small work is cheaper than a wake-up).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t align = 1,
                    int64_t min_parallel = 2);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks_;  // (num_threads) range of each thread
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace cbatch
