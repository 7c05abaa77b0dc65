#include "engine/base/thread_pool.hpp"

#include <algorithm>

#include "engine/base/signal_block.hpp"

namespace cbatch {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const StopSignalsBlocked blocked;  // workers inherit it: SIGINT/SIGTERM go to the calling thread
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::pair<int64_t, int64_t> range;
    const std::function<void(int64_t, int64_t)>* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      range = chunks_[index];
      job = job_;
    }
    if (range.first < range.second) (*job)(range.first, range.second);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    chunks_.resize(threads);
    for (int t = 0; t < threads; ++t) {
      const int64_t begin = std::min(n, t * per_thread * align);
      chunks_[t] = {begin, std::min(n, begin + per_thread * align)};
    }
    job_ = &fn;
    pending_ = threads - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  if (chunks_[0].first < chunks_[0].second) fn(chunks_[0].first, chunks_[0].second);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace cbatch
