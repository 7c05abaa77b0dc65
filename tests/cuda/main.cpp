// CUDA test runner: without a GPU every CUDA test is skipped with a visible message and the run passes.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "cuda/cuda_backend.hpp"

int main(int argc, char** argv) {
  if (cbatch::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device found; CUDA tests did not run\n");
    return 0;
  }
  std::printf("CUDA device: %s\n", cbatch::cuda_device_description(0).c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
