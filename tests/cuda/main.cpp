// CUDA test runner. Without a GPU only the "host" suite runs (what needs no device, such as opening
// cuBLAS); every other CUDA test is skipped with a visible message and the run passes.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "cuda/backend/cuda_backend.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  if (cbatch::cuda_device_count() == 0) {
    // The marker tools/skip_report.py lists (and allows in CI) as a GPU-only skip.
    std::printf("SKIPPED (no GPU): no CUDA device found; only the host tests run, the GPU tests did not\n");
    context.addFilter("test-suite", "host");
  } else {
    std::printf("CUDA device: %s\n", cbatch::cuda_device_description(0).c_str());
  }
  return context.run();
}
