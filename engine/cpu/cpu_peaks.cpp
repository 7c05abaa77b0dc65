#include "engine/cpu/cpu_peaks.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "engine/base/thread_pool.hpp"
#include "engine/cpu/cpu_matmul.hpp"

namespace cbatch {
namespace {

// The fastest of `repeats` runs of fn, in seconds (the fastest: other work on the machine only slows a run).
template <typename F>
double fastest_s(int repeats, F&& fn) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

DevicePeaks measure_cpu_peaks(ThreadPool& pool) {
  DevicePeaks peaks;
  {
    const int64_t bytes = int64_t{256} << 20;  // far beyond any L3 of a machine this runs on
    std::vector<char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes), 0);
    const int64_t chunk = 1 << 20;
    auto copy = [&] {
      pool.parallel_for(bytes / chunk, [&](int64_t begin, int64_t end) {
        std::memcpy(dst.data() + begin * chunk, src.data() + begin * chunk, static_cast<size_t>((end - begin) * chunk));
      });
    };
    copy();  // first touch
    peaks.bytes_per_s = 2.0 * static_cast<double>(bytes) / fastest_s(5, copy);
  }
  {
    const int64_t n = 1024;  // (n, n) by (n, n): about 2 GFLOP, tens of milliseconds on two cores
    std::vector<float> x(static_cast<size_t>(n * n)), y(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n * n; ++i) x[static_cast<size_t>(i)] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
    const PackedMatrix w(n, n, [&](int64_t row, int64_t rows, float* out) {
      std::memcpy(out, x.data() + row * n, static_cast<size_t>(rows * n) * sizeof(float));
    }, pool);
    auto product = [&] { matmul(x.data(), w, y.data(), n, pool); };
    product();
    peaks.flops_per_s = 2.0 * static_cast<double>(n) * n * n / fastest_s(5, product);
  }
  return peaks;
}

}  // namespace cbatch
