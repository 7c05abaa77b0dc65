// A fixed pool of worker threads for data-parallel loops: the CPU backend's kernels, and the engine's
// sampling of a step's rows. parallel_for splits a range into one contiguous chunk per thread (the caller
// runs the first), so work placement never changes results: every output element is computed by the same
// code whatever its chunk.
// A pool made with a spin window keeps its workers warm: after a loop they poll for the next one for that
// long before they sleep, so the short loops of a one-sequence decode (a few microseconds of work each,
// hundreds per step) cost no wake-up. Chunks are claimed, not assigned: a worker that is late (asleep, or
// its core taken by another process) finds its chunk already run by the caller, so a loop never waits
// for a thread that has not started; it waits only for chunks being run.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace cbatch {

// One-core time under which a loop runs on the calling thread: on the 2-core development VM a parallel_for
// round trip costs about 0.3 us with a warm (spinning) worker that has its core, 35-50 us with a sleeping
// one; the margin covers a worker whose core another process holds.
constexpr double kMinParallelNs = 10'000;

// The min_parallel argument of parallel_for for items that take about per_item_ns each on one core.
inline int64_t min_parallel_items(double per_item_ns) {
  return 1 + static_cast<int64_t>(kMinParallelNs / (per_item_ns > 1.0 ? per_item_ns : 1.0));
}

// How long the CPU backend's workers poll for the next loop: longer than the host work between two
// decode steps, short enough that an idle pool leaves the cores at once.
constexpr int64_t kDecodeSpinNs = 2'000'000;

class ThreadPool {
 public:
  // num_threads 0 = hardware concurrency; spin_ns: how long an idle worker polls before it sleeps (0:
  // it sleeps at once, for pools whose loops are rare, like the sampler's).
  explicit ThreadPool(int num_threads, int64_t spin_ns = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n); chunk boundaries are multiples of `align`.
  // Runs inline when n is below `min_parallel` (small work is cheaper than a wake-up).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t align = 1,
                    int64_t min_parallel = 2);

 private:
  void worker_loop();
  // Claims and runs chunks of loop `generation` until none is left (or the loop is over).
  void run_chunks(uint32_t generation);
  // Waits until `value` differs from `old`: polls for spin_ns_, then sleeps (counted in `sleepers`, so
  // that a writer knows to wake it).
  void await_change(const std::atomic<uint32_t>& value, uint32_t old, std::atomic<int>& sleepers) const;

  std::vector<std::thread> workers_;
  int64_t spin_ns_ = 0;
  // Written by the caller before it opens a loop in claims_, read by a thread once it has claimed a chunk.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks_;  // (num_threads) the loop's chunks
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> generation_{0};  // bumped once per loop (and at shutdown): what idle workers watch
  std::atomic<uint64_t> claims_{0};      // generation << 32 | the next unclaimed chunk of that loop
  std::atomic<uint32_t> done_{0};        // chunks of the current loop finished
  std::atomic<int> sleeping_workers_{0};
  std::atomic<int> sleeping_caller_{0};
};

}  // namespace cbatch
