#include "engine/base/thread_pool.hpp"

#include <algorithm>
#include <chrono>

#include "engine/base/signal_block.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cbatch {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spinning polls with pause for this long, then yields between polls (a sampler's thread or another
// process that wants the core gets it).
constexpr int64_t kPauseNs = 100'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, int64_t spin_ns) : spin_ns_(spin_ns) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  chunks_.resize(static_cast<size_t>(num_threads));
  const StopSignalsBlocked blocked;  // workers inherit it: SIGINT/SIGTERM go to the calling thread
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// The sleeper count and the value are both sequentially consistent: either the writer sees the sleeper
// (and notifies) or the sleeper's wait sees the new value (and returns at once).
void ThreadPool::await_change(const std::atomic<uint32_t>& value, uint32_t old, std::atomic<int>& sleepers) const {
  if (spin_ns_ > 0) {
    const int64_t start = now_ns();
    bool yielding = false;  // past the first stretch: give the core to any other runnable thread
    for (int i = 1;; ++i) {
      if (value.load(std::memory_order_acquire) != old) return;
      if (yielding) {
        std::this_thread::yield();
      } else {
        cpu_relax();
      }
      if (i % 64 == 0) {
        const int64_t t = now_ns();
        if (t > start + spin_ns_) break;
        yielding = t > start + kPauseNs;
      }
    }
  }
  sleepers.fetch_add(1);
  while (value.load() == old) value.wait(old);
  sleepers.fetch_sub(1);
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    await_change(generation_, seen, sleeping_workers_);
    seen = generation_.load();
    if (stop_.load()) return;
    run_chunks(seen);
  }
}

// A claim succeeds only while its loop is open (generation matches) and has chunks left; the caller
// cannot close the loop before every claimed chunk is done, so job_ and chunks_ stay valid meanwhile.
void ThreadPool::run_chunks(uint32_t generation) {
  const auto num_chunks = static_cast<uint32_t>(chunks_.size());
  for (;;) {
    uint64_t claim = claims_.load();
    do {
      if (static_cast<uint32_t>(claim >> 32) != generation || static_cast<uint32_t>(claim) >= num_chunks) return;
    } while (!claims_.compare_exchange_weak(claim, claim + 1));
    const std::pair<int64_t, int64_t> range = chunks_[static_cast<uint32_t>(claim)];
    if (range.first < range.second) (*job_)(range.first, range.second);
    if (done_.fetch_add(1) + 1 == num_chunks && sleeping_caller_.load() > 0) done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t align,
                              int64_t min_parallel) {
  if (n <= 0) return;
  const int threads = num_threads();
  if (threads == 1 || n < min_parallel) {
    fn(0, n);
    return;
  }
  const int64_t units = (n + align - 1) / align;
  const int64_t per_thread = (units + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = std::min(n, t * per_thread * align);
    chunks_[static_cast<size_t>(t)] = {begin, std::min(n, begin + per_thread * align)};
  }
  job_ = &fn;
  done_.store(0);
  const uint32_t generation = generation_.load() + 1;
  claims_.store(static_cast<uint64_t>(generation) << 32);  // opens the loop; publishes job_ and chunks_
  generation_.store(generation);
  if (sleeping_workers_.load() > 0) generation_.notify_all();
  run_chunks(generation);
  const auto num_chunks = static_cast<uint32_t>(threads);
  for (uint32_t done = done_.load(std::memory_order_acquire); done != num_chunks; done = done_.load(std::memory_order_acquire)) {
    await_change(done_, done, sleeping_caller_);
  }
}

}  // namespace cbatch
